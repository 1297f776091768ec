"""The device manager as the Topology Manager's hint provider (the kubelet's devicemanager GetTopologyHints,
GetPodTopologyHints and Allocate as the scope calls them).

`DeviceManagerProvider` reads a snapshot of the device manager's public state for each question (every
device with its health and NUMA nodes, what every container holds), answers with `DeviceHintSource`,
and allocates an admitted container's device resources with the merged affinity as the NUMA hint.
Devices held by a pod's init containers are not handed on to its app containers here (the device
manager keeps them until the pod ends), so nothing is "reusable" in the kubelet's sense.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from agent.cm.devicemanager import PodRef
from agent.cm.topologymanager.devicehints import DeviceHintSource, DeviceNUMA
from agent.cm.topologymanager.hints import ProviderHints, TopologyHint
from agent.cm.topologymanager.manager import TopologyManager, new_manager
from agent.cm.topologymanager.policies import NONE
from kubenode.devicecontract import device_plugin_limits
from kubenode.model import Container, Pod

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceManager

log = logging.getLogger("agent.cm.topologymanager")


class DeviceSnapshot:
    """The DeviceView of one moment of the device manager."""

    def __init__(self, devices: DeviceManager) -> None:
        self.numa: dict[str, dict[str, tuple[int, ...]]] = {}
        self.healthy: dict[str, list[str]] = {}
        for status in devices.resources():
            self.numa[status.name] = {d.id: tuple(sorted(d.numa_nodes)) for d in status.devices}
            self.healthy[status.name] = [d.id for d in status.devices if d.healthy]
        self.held: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
        self.taken: dict[str, set[str]] = {}
        for allocation in devices.allocations():
            self.held[(allocation.pod.uid, allocation.container)] = dict(allocation.devices)
            for resource, ids in allocation.devices.items():
                self.taken.setdefault(resource, set()).update(ids)

    def is_device_resource(self, resource: str) -> bool:
        return resource in self.numa

    def device_numa(self, resource: str) -> DeviceNUMA:
        return self.numa.get(resource, {})

    def free_devices(self, resource: str) -> Collection[str]:
        taken = self.taken.get(resource, set())
        return [d for d in self.healthy.get(resource, []) if d not in taken]

    def held_by_container(self, pod_uid: str, container: str, resource: str) -> Collection[str]:
        return self.held.get((pod_uid, container), {}).get(resource, ())

    def held_by_pod(self, pod_uid: str, resource: str) -> Collection[str]:
        return {d for (uid, _), held in self.held.items() if uid == pod_uid for d in held.get(resource, ())}

    def reusable(self, pod_uid: str, resource: str) -> Collection[str]:
        return ()

    def reported_nodes(self) -> dict[int, str]:
        """Every NUMA node a device reports -> one device on it ("resource/id"), for the log."""
        return {
            node: f"{resource}/{device}"
            for resource, devices in sorted(self.numa.items())
            for device, nodes in sorted(devices.items(), reverse=True)
            for node in nodes
        }


class DeviceManagerProvider:
    def __init__(self, devices: DeviceManager, numa_nodes: Iterable[int]) -> None:
        self.devices = devices
        self.numa_nodes = tuple(numa_nodes)
        self._logged: set[int] = set()

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return self._source().container_hints(pod, container)

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        return self._source().pod_hints(pod)

    def _source(self) -> DeviceHintSource:
        """Hints over the machine's NUMA nodes and every node a device reports. A kubelet's devices can only
        be on nodes sysfs lists; a static device may name any (a fake topology on a smaller machine), and
        masks left without its node would count it nowhere: a gpu on node 1 and a nic on node 0 would both
        fit "node 0", merged into "anywhere", and be allocated apart."""
        snapshot = DeviceSnapshot(self.devices)
        reported = snapshot.reported_nodes()
        for node in sorted(set(reported) - set(self.numa_nodes) - self._logged):
            self._logged.add(node)
            log.warning(
                "device %s reports NUMA node %d, which the machine's sysfs does not list (nodes %s); "
                "the Topology Manager aligns on it as on the others",
                reported[node], node, ",".join(map(str, self.numa_nodes)),
            )  # fmt: skip
        return DeviceHintSource(snapshot, {*self.numa_nodes, *reported})

    def allocate(self, pod: Pod, container: Container, affinity: TopologyHint) -> None:
        wanted = device_plugin_limits(container.limits)
        if not wanted:
            return
        hint = None if affinity.affinity is None else frozenset(affinity.affinity.bits())
        self.devices.allocate(
            PodRef(pod.uid, pod.namespace, pod.name), container.name, wanted, numa_hint=hint
        )


def topology_manager_for(
    policy: str,
    scope: str,
    options: dict[str, str],
    sysfs_root: str,
    devices: DeviceManager | None,
) -> TopologyManager | None:
    """The agent's Topology Manager, with the device manager as its hint provider; None under the none
    policy (allocation then happens as before: unaligned, when the pod's containers start)."""
    if devices is None or policy == NONE:
        return None
    manager = new_manager(policy, scope, options, sysfs_root=sysfs_root)
    manager.add_hint_provider(DeviceManagerProvider(devices, manager.numa_nodes))
    return manager
