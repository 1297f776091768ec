"""From the device manager's devices to the devices a container gets, through the Topology Manager: hints
(DeviceManagerProvider), merge and admission (the policy, the container scope), allocation with the merged
affinity (the device manager's select_devices).

Issue 37's node: example.com/gpu has two devices on NUMA node 0 and one on node 1, example.com/nic one on
node 0 and two on node 1. The devices are static, so they may name a node the machine's sysfs does not list:
every case runs on a machine with both nodes and on one with node 0 only (this machine), with the same
outcome. Under single-numa-node a pod's devices come from one node or the pod is refused, never split; the
plugin's own preference (here: the last devices it advertises) only chooses within the merged node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from agent.cm.devicemanager.records import AllocationError, Device
from agent.cm.devicemanager.selection import select_devices
from agent.cm.topologymanager.deviceprovider import DeviceManagerProvider
from agent.cm.topologymanager.manager import new_manager
from agent.cm.topologymanager.policies import BEST_EFFORT, RESTRICTED
from agent.cm.topologymanager.publisher import TopologyPublisher
from kubenode.model import Container, Pod

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceManager, PodRef
    from kubenode.kubeclient import KubeClient

GPU, NIC = "example.com/gpu", "example.com/nic"
ISSUE_37 = {GPU: {"gpu-0": 0, "gpu-1": 0, "gpu-2": 1}, NIC: {"nic-0": 0, "nic-1": 1, "nic-2": 1}}
SINGLE = "single-numa-node"
MACHINES = pytest.mark.parametrize("machine", [(0, 1), (0,)], ids=["sysfs-two-nodes", "sysfs-node0-only"])


@dataclass(frozen=True)
class _Status:
    name: str
    devices: tuple[Device, ...]


@dataclass(frozen=True)
class _Held:
    pod: PodRef
    container: str
    devices: dict[str, tuple[str, ...]]


@dataclass
class Devices:
    """The device manager's side the provider reads and allocates through: advertised devices, what is held,
    and select_devices (the device manager's own choice) with a plugin that prefers its last devices."""

    numa: Mapping[str, Mapping[str, int]]
    held: list[_Held] = field(default_factory=list)

    def resources(self) -> list[_Status]:
        return [
            _Status(name, tuple(Device(d, True, frozenset({n})) for d, n in ids.items()))
            for name, ids in sorted(self.numa.items())
        ]

    def allocations(self) -> list[_Held]:
        return list(self.held)

    def allocate(
        self, pod: PodRef, container: str, requests: Mapping[str, int], numa_hint: frozenset[int] | None
    ) -> None:
        chosen = {}
        for resource, count in sorted(requests.items()):
            taken = {d for h in self.held for d in h.devices.get(resource, ())}
            free = [d for d in self.resources_by_name()[resource] if d.id not in taken]
            chosen[resource] = tuple(select_devices(resource, free, count, numa_hint, self.prefer_last))
        self.held.append(_Held(pod, container, chosen))

    def resources_by_name(self) -> dict[str, tuple[Device, ...]]:
        return {s.name: s.devices for s in self.resources()}

    @staticmethod
    def prefer_last(available: list[str], must: list[str], size: int) -> list[str]:
        return must + [d for d in reversed(available) if d not in must][: size - len(must)]


def pod(name: str, gpus: int, nics: int) -> Pod:
    limits = {r: n for r, n in ((GPU, gpus), (NIC, nics)) if n}
    return Pod(name, uid=f"uid-{name}", containers=(Container("main", limits=limits, requests=limits),))


def admit(
    devices: Devices, machine: Sequence[int], policy: str, p: Pod
) -> tuple[bool, str, dict[str, set[int]]]:
    """(admitted, the merged hint, per resource the NUMA nodes of the devices the container got)."""
    manager = new_manager(policy, "container", {}, nodes=machine)
    manager.add_hint_provider(DeviceManagerProvider(cast("DeviceManager", devices), manager.numa_nodes))
    result = manager.admit(p)
    (decision,) = manager.decisions(p.uid)
    got = next((h.devices for h in devices.held if h.pod.uid == p.uid), {})
    nodes = {r: {devices.numa[r][d] for d in ids} for r, ids in got.items()}
    return result.admit, str(decision.merged), nodes


# (gpus, nics) -> under single-numa-node: the merged hint, the one node all devices come from (None: refused).
SINGLE_CASES = [
    ((1, 1), "{0 preferred}", 0),  # issue 37: the gpu came from node 1 and the nic from node 0
    ((1, 2), "{1 preferred}", 1),  # two nics: only node 1 has them, and a gpu
    ((2, 1), "{0 preferred}", 0),  # two gpus: only node 0
    ((1, 0), "{0 preferred}", 0),  # one resource: the lowest of the nodes that hold it
    ((0, 2), "{1 preferred}", 1),
    ((2, 2), "{any not preferred}", None),  # no node holds two of each: refused
    ((3, 0), "{any not preferred}", None),  # three gpus span both nodes: refused
]


@MACHINES
@pytest.mark.parametrize(("request_", "merged", "node"), SINGLE_CASES, ids=[str(c[0]) for c in SINGLE_CASES])
def test_single_numa_node_aligns_or_refuses(
    machine: tuple[int, ...], request_: tuple[int, int], merged: str, node: int | None
) -> None:
    devices = Devices(ISSUE_37)
    admitted, got_merged, nodes = admit(devices, machine, SINGLE, pod("p", *request_))
    assert (admitted, got_merged) == (node is not None, merged)
    if node is None:
        assert devices.held == []  # a refused pod holds nothing
    else:
        assert all(n == {node} for n in nodes.values()), nodes


@MACHINES
def test_pods_one_after_another_stay_aligned_until_no_node_can_hold_one(machine: tuple[int, ...]) -> None:
    devices = Devices(ISSUE_37)
    first = admit(devices, machine, SINGLE, pod("first", 1, 1))
    assert first == (True, "{0 preferred}", {GPU: {0}, NIC: {0}})
    # Node 0's only nic is taken: the next pod goes to node 1 whole.
    second = admit(devices, machine, SINGLE, pod("second", 1, 1))
    assert second == (True, "{1 preferred}", {GPU: {1}, NIC: {1}})
    # A gpu is left on node 0 and a nic on node 1: no node holds both.
    third = admit(devices, machine, SINGLE, pod("third", 1, 1))
    assert third == (False, "{any not preferred}", {})


@MACHINES
@pytest.mark.parametrize(
    ("policy", "request_", "expected"),
    [
        (RESTRICTED, (1, 1), (True, "{0 preferred}", {GPU: {0}, NIC: {0}})),
        # kube's merge: gpu {0} with nic {0,1}, the narrowest of the non-preferred ones.
        (RESTRICTED, (2, 2), (False, "{0 not preferred}", {})),
        (BEST_EFFORT, (1, 1), (True, "{0 preferred}", {GPU: {0}, NIC: {0}})),
        # Best effort runs what it cannot align: node 0's devices first, then the rest.
        (BEST_EFFORT, (2, 2), (True, "{0 not preferred}", {GPU: {0}, NIC: {0, 1}})),
    ],
)
def test_the_other_policies_on_the_same_node(
    machine: tuple[int, ...], policy: str, request_: tuple[int, int], expected: tuple[object, ...]
) -> None:
    assert admit(Devices(ISSUE_37), machine, policy, pod("p", *request_)) == expected


def test_select_devices_refuses_more_than_are_free() -> None:
    with pytest.raises(AllocationError, match="Requested: 2, Available: 1"):
        select_devices(GPU, [Device("gpu-0", True, frozenset({0}))], 2, frozenset({0}), None)


def test_the_published_topology_has_a_zone_for_a_node_only_devices_report(tmp_path: Path) -> None:
    node0 = tmp_path / "devices/system/node/node0"
    node0.mkdir(parents=True)
    (node0 / "distance").write_text("10\n")
    devices = cast("DeviceManager", Devices(ISSUE_37))
    publisher = TopologyPublisher(cast("KubeClient", None), "n", devices, SINGLE, "container", str(tmp_path))
    zones = {
        z["name"]: {r["name"]: r["available"] for r in z["resources"]} for z in publisher.build()["zones"]
    }
    assert zones == {"node-0": {GPU: "2", NIC: "1"}, "node-1": {GPU: "1", NIC: "2"}}
