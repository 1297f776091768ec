"""Topology hints for device resources (the kubelet's cm/devicemanager/topology_hints.go).

For each device resource a container (or, in the pod scope, the pod) requests:
- no device of the resource has a NUMA node: None (no preference);
- the container already holds devices of it: hints regenerated from those (a different count: []);
- fewer free (plus reusable) devices than requested: [] (no placement possible);
- otherwise every NUMA mask whose free devices (plus reusable ones, all of which must lie in the
  mask) cover the request, preferred when the mask is as narrow as the resource allows at all,
  counting every device of the machine (so a busy node does not make a wider mask "preferred").
`DeviceHintSource` answers these from a `DeviceView`, the device manager's state; kubenode's CPUs
are devices too (kubenode.io/cpu), so they get hints the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol

from agent.cm.topologymanager.bitmask import BitMask, iterate_bitmasks
from agent.cm.topologymanager.hints import ProviderHints, TopologyHint
from kubenode.model import Container, Pod

# device id -> its NUMA nodes (empty: no topology)
DeviceNUMA = Mapping[str, Collection[int]]


def generate_device_hints(
    numa_nodes: Collection[int],
    devices: DeviceNUMA,
    available: Collection[str],
    reusable: Collection[str],
    request: int,
) -> list[TopologyHint]:
    """Every mask that can hold `request` devices from `available` (with all of `reusable` in it)."""
    nodes = sorted(numa_nodes)
    # Devices grouped by their NUMA mask: a mask's count is a sum over a few groups, not over every device.
    every = _count_by_mask(devices, devices)
    free = _count_by_mask(devices, available)
    reused = [_mask_of(devices.get(d, ())) for d in reusable]
    reused = [m for m in reused if m]
    min_affinity = len(nodes)
    fitting: list[BitMask] = []

    def consider(mask: BitMask) -> None:
        nonlocal min_affinity
        if mask.count() < min_affinity and sum(n for m, n in every.items() if m & mask.value) >= request:
            min_affinity = mask.count()
        if any(not m & mask.value for m in reused):
            return
        if len(reused) + sum(n for m, n in free.items() if m & mask.value) >= request:
            fitting.append(mask)

    iterate_bitmasks(nodes, consider)
    return [TopologyHint(mask, mask.count() == min_affinity) for mask in fitting]


def _mask_of(numa: Collection[int]) -> int:
    return BitMask.of(*numa).value if numa else 0


def _count_by_mask(devices: DeviceNUMA, ids: Collection[str]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for device in ids:
        mask = _mask_of(devices.get(device, ()))
        if mask:
            counts[mask] = counts.get(mask, 0) + 1
    return counts


class DeviceView(Protocol):
    """The device manager's state the hints are computed from."""

    def is_device_resource(self, resource: str) -> bool:
        """A resource some plugin registered (kube's isDevicePluginResource)."""
        ...

    def device_numa(self, resource: str) -> DeviceNUMA:
        """Every device of the resource with its NUMA nodes."""
        ...

    def free_devices(self, resource: str) -> Collection[str]:
        """Healthy devices nobody holds."""
        ...

    def held_by_container(self, pod_uid: str, container: str, resource: str) -> Collection[str]: ...

    def held_by_pod(self, pod_uid: str, resource: str) -> Collection[str]: ...

    def reusable(self, pod_uid: str, resource: str) -> Collection[str]:
        """Devices the pod's finished init containers held that app containers may take again."""
        ...


def container_device_requests(view: DeviceView, container: Container) -> dict[str, int]:
    """The container's device resources (limits; requests where no limit is set, they must match)."""
    amounts = {**container.requests, **container.limits}
    return {
        name: int(amount) for name, amount in amounts.items() if amount > 0 and view.is_device_resource(name)
    }


def pod_device_requests(view: DeviceView, pod: Pod) -> dict[str, int]:
    """The pod's device resources: its effective limits (init peak against the steady state), no overhead."""
    return {
        name: int(amount) - int(pod.overhead.get(name, 0))
        for name, amount in pod.limits.items()
        if amount > 0 and view.is_device_resource(name)
    }


def has_topology(devices: DeviceNUMA) -> bool:
    return any(numa for numa in devices.values())


class DeviceHintSource:
    """Hints for the device resources of a container or a pod (the HintProvider's hint half)."""

    def __init__(self, view: DeviceView, numa_nodes: Collection[int]) -> None:
        self.view = view
        self.numa_nodes = tuple(sorted(numa_nodes))

    def container_hints(self, pod: Pod, container: Container) -> ProviderHints:
        hints: dict[str, list[TopologyHint] | None] = {}
        for resource, requested in container_device_requests(self.view, container).items():
            held = self.view.held_by_container(pod.uid, container.name, resource)
            reusable = self.view.reusable(pod.uid, resource)
            hints[resource] = self._resource_hints(resource, requested, held, reusable)
        return hints

    def pod_hints(self, pod: Pod) -> ProviderHints:
        hints: dict[str, list[TopologyHint] | None] = {}
        for resource, requested in pod_device_requests(self.view, pod).items():
            held = self.view.held_by_pod(pod.uid, resource)
            hints[resource] = self._resource_hints(resource, requested, held, ())
        return hints

    def _resource_hints(
        self, resource: str, requested: int, held: Collection[str], reusable: Collection[str]
    ) -> list[TopologyHint] | None:
        devices = self.view.device_numa(resource)
        if not has_topology(devices):
            return None
        if held:
            if len(held) != requested:
                return []
            return generate_device_hints(self.numa_nodes, devices, held, (), requested)
        available = self.view.free_devices(resource)
        if len(set(available) | set(reusable)) < requested:
            return []
        return generate_device_hints(self.numa_nodes, devices, available, reusable, requested)
