"""Which container limits the agent hands to the device manager (the kubelet's rule)."""

from __future__ import annotations

from kubenode.devicecontract import device_plugin_limits


def test_only_positive_extended_resources_go_to_the_device_manager() -> None:
    limits = {
        "cpu": 2000,
        "memory": 2**30,
        "hugepages-2Mi": 4 * 2**20,
        "ephemeral-storage": 2**30,
        "example.kubernetes.io/widget": 1,  # kubernetes.io names are the kubelet's own
        "kubenode.io/cpu": 2,
        "example.com/gpu": 1,
        "example.com/unused": 0,
    }
    assert device_plugin_limits(limits) == {"kubenode.io/cpu": 2, "example.com/gpu": 1}


def test_a_container_without_extended_resources_asks_for_no_devices() -> None:
    assert device_plugin_limits({"cpu": 1000, "memory": 2**20}) == {}
