"""The driver's ResourceSlice publisher against a real `kubenode apiserver` process.

The server serves resource.k8s.io/v1: the slice is created, left alone when nothing changed, rewritten
with the pool's generation raised when a device turns unhealthy, and withdrawn.
"""

from __future__ import annotations

import dataclasses

import pytest

from deviceplugin.dra.inventory import DraDevice
from deviceplugin.dra.slices import SlicePublisher, slice_name
from kubenode.kubeclient import RESOURCE_SLICES, KubeClient, NotFound

DEVICES = [
    DraDevice("cpu-0", {"numaNode": {"int": 0}}),
    DraDevice("cpu-1", {"numaNode": {"int": 0}}),
]


def test_publish_create_update_withdraw(kube: KubeClient) -> None:
    publisher = SlicePublisher(kube, "node-a", "cpu.kubenode.io")
    assert publisher.name == slice_name("node-a", "cpu.kubenode.io") == "node-a-cpu-kubenode-io"
    assert publisher.publish(DEVICES)
    first = kube.get(RESOURCE_SLICES, publisher.name)
    assert first["spec"]["driver"] == "cpu.kubenode.io"
    assert first["spec"]["nodeName"] == "node-a"
    assert first["spec"]["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in first["spec"]["devices"]] == ["cpu-0", "cpu-1"]
    assert not publisher.publish(DEVICES)
    # A fresh publisher (a restarted driver) finds the slice as it should be: nothing written.
    assert not SlicePublisher(kube, "node-a", "cpu.kubenode.io").publish(DEVICES)
    unhealthy = [DEVICES[0], dataclasses.replace(DEVICES[1], healthy=False)]
    assert publisher.publish(unhealthy)
    second = kube.get(RESOURCE_SLICES, publisher.name)
    assert second["spec"]["pool"]["generation"] == 2
    assert [d["name"] for d in second["spec"]["devices"]] == ["cpu-0"]
    publisher.withdraw()
    with pytest.raises(NotFound):
        kube.get(RESOURCE_SLICES, publisher.name)
