"""kube's cm/devicemanager/topology_hints_test.go (TestGetTopologyHints, TestGetPodTopologyHints)
against DeviceHintSource, case by case; two NUMA nodes as there."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import pytest

from agent.cm.topologymanager import BitMask, DeviceHintSource, TopologyHint
from agent.cm.topologymanager.devicehints import DeviceNUMA, generate_device_hints
from kubenode.model import Container, Pod

Devices = dict[str, list[tuple[str, int | None]]]
Allocated = dict[str, dict[str, dict[str, list[str]]]]  # pod -> container -> resource -> ids
Expected = dict[str, list[tuple[tuple[int, ...], bool]] | None]


@dataclass
class FakeView:
    devices: Devices
    allocated: Allocated = field(default_factory=dict)

    def is_device_resource(self, resource: str) -> bool:
        return resource in self.devices

    def device_numa(self, resource: str) -> DeviceNUMA:
        return {d: () if n is None else (n,) for d, n in self.devices.get(resource, [])}

    def free_devices(self, resource: str) -> Collection[str]:
        taken = {d for c in self.allocated.values() for r in c.values() for d in r.get(resource, [])}
        return [d for d, _ in self.devices.get(resource, []) if d not in taken]

    def held_by_container(self, pod_uid: str, container: str, resource: str) -> Collection[str]:
        return self.allocated.get(pod_uid, {}).get(container, {}).get(resource, [])

    def held_by_pod(self, pod_uid: str, resource: str) -> Collection[str]:
        return {d for c in self.allocated.get(pod_uid, {}).values() for d in c.get(resource, [])}

    def reusable(self, pod_uid: str, resource: str) -> Collection[str]:
        return ()


def c(name: str, limits: Mapping[str, int]) -> Container:
    return Container(name, limits=dict(limits), requests=dict(limits))


def pod(*containers: Container, init: tuple[Container, ...] = ()) -> Pod:
    return Pod("fake", uid="fakePod", containers=containers, init_containers=init)


TWO_PER_NODE: list[tuple[str, int | None]] = [("Dev1", 0), ("Dev2", 0), ("Dev3", 1), ("Dev4", 1)]
BOTH_SINGLE = [((0,), True), ((1,), True), ((0, 1), False)]

# (description, pod, devices, allocated, expected hints)
COMMON: list[tuple[str, Pod, Devices, Allocated, Expected]] = [
    (
        "Single Request, no alignment",
        pod(c("fakeContainer", {"testdevice": 1})),
        {"testdevice": [("Dev1", None), ("Dev2", None)]},
        {},
        {"testdevice": None},
    ),
    (
        "Single Request, only one with alignment",
        pod(c("fakeContainer", {"testdevice": 1})),
        {"testdevice": [("Dev1", None), ("Dev2", 1)]},
        {},
        {"testdevice": [((1,), True), ((0, 1), False)]},
    ),
    (
        "Single Request, one device per socket",
        pod(c("fakeContainer", {"testdevice": 1})),
        {"testdevice": [("Dev1", 0), ("Dev2", 1)]},
        {},
        {"testdevice": BOTH_SINGLE},
    ),
    (
        "Request for 2, one device per socket",
        pod(c("fakeContainer", {"testdevice": 2})),
        {"testdevice": [("Dev1", 0), ("Dev2", 1)]},
        {},
        {"testdevice": [((0, 1), True)]},
    ),
    (
        "Request for 2, 2 devices per socket",
        pod(c("fakeContainer", {"testdevice": 2})),
        {"testdevice": [("Dev1", 0), ("Dev2", 1), ("Dev3", 0), ("Dev4", 1)]},
        {},
        {"testdevice": BOTH_SINGLE},
    ),
    (
        "Request for 2, optimal on 1 NUMA node, forced cross-NUMA",
        pod(c("fakeContainer", {"testdevice": 2})),
        {"testdevice": [("Dev1", 0), ("Dev2", 1), ("Dev3", 0), ("Dev4", 1)]},
        {"fakePod": {"fakeOtherContainer": {"testdevice": ["Dev1", "Dev2"]}}},
        {"testdevice": [((0, 1), False)]},
    ),
    (
        "2 device types, mixed configuration",
        pod(c("fakeContainer", {"testdevice1": 2, "testdevice2": 1})),
        {"testdevice1": [("Dev1", 0), ("Dev2", 1), ("Dev3", 0), ("Dev4", 1)], "testdevice2": [("Dev1", 0)]},
        {},
        {"testdevice1": BOTH_SINGLE, "testdevice2": [((0,), True), ((0, 1), False)]},
    ),
    (
        "Single device type, more requested than available",
        pod(c("fakeContainer", {"testdevice": 6})),
        {"testdevice": TWO_PER_NODE},
        {},
        {"testdevice": []},
    ),
    (
        "Single device type, all already allocated to container",
        pod(c("fakeContainer", {"testdevice": 2})),
        {"testdevice": [("Dev1", 0), ("Dev2", 0)]},
        {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2"]}}},
        {"testdevice": [((0,), True), ((0, 1), False)]},
    ),
    (
        "Single device type, less already allocated to container than requested",
        pod(c("fakeContainer", {"testdevice": 4})),
        {"testdevice": TWO_PER_NODE},
        {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2"]}}},
        {"testdevice": []},
    ),
    (
        "Single device type, more already allocated to container than requested",
        pod(c("fakeContainer", {"testdevice": 2})),
        {"testdevice": TWO_PER_NODE},
        {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2", "Dev3", "Dev4"]}}},
        {"testdevice": []},
    ),
]

POD_SCOPE: list[tuple[str, Pod, Devices, Allocated, Expected]] = [
    (
        "2 device types, user container only",
        pod(
            c("fakeContainer1", {"testdevice1": 2}),
            c("fakeContainer2", {"testdevice2": 2}),
            c("fakeContainer3", {"notRegistered": 2}),
        ),
        {"testdevice1": TWO_PER_NODE, "testdevice2": TWO_PER_NODE},
        {},
        {"testdevice1": BOTH_SINGLE, "testdevice2": BOTH_SINGLE},
    ),
    (
        "2 device types, request resources for init containers and user container",
        pod(
            c("fakeContainer1", {"testdevice1": 1, "testdevice2": 1}),
            c("fakeContainer2", {"testdevice1": 1, "testdevice2": 1}),
            c("fakeContainer3", {"notRegistered": 1}),
            init=(
                c("init1", {"testdevice1": 1, "testdevice2": 1}),
                c("init2", {"testdevice1": 1, "testdevice2": 2}),
            ),
        ),
        {"testdevice1": TWO_PER_NODE, "testdevice2": TWO_PER_NODE},
        {},
        {"testdevice1": BOTH_SINGLE, "testdevice2": BOTH_SINGLE},
    ),
    (
        "2 device types, user container only, optimal on 1 NUMA node, forced cross-NUMA",
        pod(
            c("fakeContainer1", {"testdevice1": 1, "testdevice2": 1}),
            c("fakeContainer2", {"testdevice1": 1, "testdevice2": 1}),
            c("fakeContainer3", {"notRegistered": 1}),
        ),
        {"testdevice1": TWO_PER_NODE, "testdevice2": TWO_PER_NODE},
        {
            "fakeOtherPod": {
                "fakeOtherContainer": {"testdevice1": ["Dev1", "Dev3"], "testdevice2": ["Dev1", "Dev3"]}
            }
        },
        {"testdevice1": [((0, 1), False)], "testdevice2": [((0, 1), False)]},
    ),
]


def normalised(hints: object) -> object:
    if hints is None:
        return None
    assert isinstance(hints, list)
    return sorted(hints, key=TopologyHint.sort_key)


def expected_hints(expected: Expected) -> dict[str, object]:
    return {
        r: None if hs is None else normalised([TopologyHint(BitMask.of(*n), p) for n, p in hs])
        for r, hs in expected.items()
    }


@pytest.mark.parametrize(
    ("name", "p", "devices", "allocated", "expected"), COMMON, ids=[c[0] for c in COMMON]
)
def test_get_topology_hints(
    name: str, p: Pod, devices: Devices, allocated: Allocated, expected: Expected
) -> None:
    source = DeviceHintSource(FakeView(devices, allocated), (0, 1))
    hints = source.container_hints(p, p.containers[0])
    assert hints is not None
    assert {r: normalised(hints[r]) for r in expected} == expected_hints(expected)


@pytest.mark.parametrize(
    ("name", "p", "devices", "allocated", "expected"),
    COMMON + POD_SCOPE,
    ids=[c[0] for c in COMMON + POD_SCOPE],
)
def test_get_pod_topology_hints(
    name: str, p: Pod, devices: Devices, allocated: Allocated, expected: Expected
) -> None:
    source = DeviceHintSource(FakeView(devices, allocated), (0, 1))
    hints = source.pod_hints(p)
    assert hints is not None
    assert {r: normalised(hints[r]) for r in expected} == expected_hints(expected)


def test_reusable_devices_must_lie_in_the_mask() -> None:
    # An init container's devices (reusable) are on node 1: only masks holding node 1 are offered.
    devices = {"Dev1": (0,), "Dev2": (0,), "Dev3": (1,)}
    hints = generate_device_hints((0, 1), devices, available=["Dev1", "Dev2"], reusable=["Dev3"], request=2)
    assert sorted(hints, key=TopologyHint.sort_key) == [
        TopologyHint(BitMask.of(0, 1), False),
    ]
