"""The published NodeResourceTopology: zones, counts, costs and attributes; the scheduler reads it back."""

from __future__ import annotations

from agent.cm.topologymanager.publish import topology_object, zone_counts
from scheduler.numa import Zone, parse_node_topology

CPU, GPU = "kubenode.io/cpu", "kubenode.io/gpu"


def test_zone_counts() -> None:
    devices = {"g0": (0,), "g1": (0,), "g2": (1,), "g3": (), "g4": (1, 0)}
    assert zone_counts(devices, healthy={"g0", "g1", "g2", "g4"}, free={"g1", "g2", "g3"}) == {
        0: (3, 3, 1),
        1: (1, 1, 1),
    }


def test_topology_object_round_trips_through_the_schedulers_parser() -> None:
    obj = topology_object(
        "n1",
        "single-numa-node",
        "pod",
        [0, 1],
        {CPU: {0: (8, 8, 4), 1: (8, 8, 8)}, GPU: {1: (2, 1, 0)}},
        {0: [10, 21], 1: [21, 10]},
        ["ml/a", "default/b"],
    )
    assert obj["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    assert obj["zones"][0]["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}]
    assert [r["name"] for r in obj["zones"][0]["resources"]] == [CPU]
    parsed = parse_node_topology(obj)
    assert (parsed.policy, parsed.scope, parsed.accounted) == (
        "single-numa-node",
        "pod",
        frozenset({"ml/a", "default/b"}),
    )
    assert parsed.zones == (
        Zone("node-0", {CPU: 8}, {CPU: 4}, {CPU: 8}),
        Zone("node-1", {CPU: 8, GPU: 1}, {CPU: 8, GPU: 0}, {CPU: 8, GPU: 2}),
    )
