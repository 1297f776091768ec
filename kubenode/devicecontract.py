"""The values of the Device Plugin API contract that both its sides (kubenode's plugins, the agent) rely on.

`CPUSET_ENV` is the env var kubenode's CPU plugin answers Allocate with (the CPUs, as a cpuset list): the
agent pins the pod cgroup to it, the CDI spec sets it. `device_plugin_limits` is the kubelet's rule for what
the device manager allocates: the positive extended resources of a container's limits (cpu, memory,
hugepages-* and kubernetes.io/ names stay the kubelet's own).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubenode.model.resources import is_extended_resource_name

CPUSET_ENV = "KUBENODE_CPUSET"


def device_plugin_limits(limits: Mapping[str, int]) -> dict[str, int]:
    """The amounts of `limits` that device plugins serve: positive extended resources only."""
    return {r: int(n) for r, n in limits.items() if n > 0 and is_extended_resource_name(r)}


# kubenode's DRA driver for CPUs (deviceplugin/dra): one device `cpu-<n>` per logical CPU. The agent pins a
# pod holding such devices to those CPUs (its exclusive cpuset), as it does for the CPU plugin's answer.
DRA_CPU_DRIVER = "cpu.kubenode.io"


def dra_cpu(driver: str, device: str) -> int | None:
    """The CPU a device of kubenode's CPU driver stands for; None for any other device."""
    if driver != DRA_CPU_DRIVER or not device.startswith("cpu-") or not device[4:].isdigit():
        return None
    return int(device[4:])
