"""The NUMA filter and score (scheduler/numa.py): the node's Topology Manager replayed per policy and
scope, the engine never binding a pod the node would refuse, LeastNUMANodes, and the simulator."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubenode.model.objects import Container, Pod
from scheduler.numa import NodeTopology, TopologyError, Zone, parse_node_topology, place
from scheduler.simulate import read_cluster, simulate
from tests.scheduler.support import GPU, engine, node, pod

CPU = "kubenode.io/cpu"
ROOT = Path(__file__).parents[2]


def topology(
    name: str, zones: list[dict[str, int]], policy: str = "single-numa-node", scope: str = "container"
) -> NodeTopology:
    return NodeTopology(
        name, policy, scope, tuple(Zone(f"node-{i}", dict(z), dict(z)) for i, z in enumerate(zones))
    )


TWO_ZONES = [{CPU: 8, GPU: 1}, {CPU: 8, GPU: 1}]


def nrt_object(name: str, **attributes: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "attributes": [{"name": k, "value": v} for k, v in attributes.items()],
        "zones": [
            {
                "name": "node-0",
                "type": "Node",
                "resources": [{"name": GPU, "allocatable": "2", "available": "1"}],
            }
        ],
    }


def test_parse_node_topology() -> None:
    parsed = parse_node_topology(
        nrt_object(
            "n1",
            topologyManagerPolicy="restricted",
            topologyManagerScope="pod",
            **{"kubenode.io/pods": "a/b"},
        )
    )
    assert (parsed.node, parsed.policy, parsed.scope, parsed.accounted) == (
        "n1",
        "restricted",
        "pod",
        frozenset({"a/b"}),
    )
    assert parsed.zones == (Zone("node-0", {GPU: 2}, {GPU: 1}, {GPU: 2}),)
    legacy = nrt_object("n2")
    legacy["topologyPolicies"] = ["SingleNUMANodePodLevel"]
    assert (parse_node_topology(legacy).policy, parse_node_topology(legacy).scope) == (
        "single-numa-node",
        "pod",
    )
    with pytest.raises(TopologyError, match="unknown policy 'strict'"):
        parse_node_topology(nrt_object("n3", topologyManagerPolicy="strict"))
    with pytest.raises(TopologyError, match=r"zones\[0\]\.name is required"):
        parse_node_topology({"metadata": {"name": "n4"}, "zones": [{"type": "Node"}]})


def two_containers(first: dict[str, int], second: dict[str, int]) -> Pod:
    return Pod("p", containers=(Container("a", limits=first), Container("b", limits=second)))


@pytest.mark.parametrize(
    ("policy", "requests", "admitted", "widest"),
    [
        ("single-numa-node", {CPU: 4, GPU: 1}, True, 1),
        ("single-numa-node", {CPU: 12, GPU: 1}, False, 0),
        ("restricted", {CPU: 4, GPU: 1}, True, 1),
        # 12 CPUs need both zones (preferred mask {0,1}) while 1 GPU prefers a single zone: no common mask.
        ("restricted", {CPU: 12, GPU: 1}, False, 0),
        ("restricted", {CPU: 12, GPU: 2}, True, 2),
        ("best-effort", {CPU: 12, GPU: 1}, True, 2),
        ("none", {CPU: 12, GPU: 1}, True, 2),
    ],
)
def test_policies(policy: str, requests: dict[str, int], admitted: bool, widest: int) -> None:
    placement = place(topology("n", TWO_ZONES, policy), pod("p", requests))
    assert (placement.topology is not None, placement.widest) == (admitted, widest)
    if not admitted:
        assert placement.reason == "cannot align container"


def test_narrowest_is_measured_on_every_device_healthy_or_not() -> None:
    # Zone 0 has 2 GPUs but one is unhealthy: the node's hints still prefer single zones (the kubelet
    # counts every device), so under restricted a 2-GPU pod needs both zones and is refused.
    zones = (
        Zone("node-0", {GPU: 1}, {GPU: 1}, {GPU: 2}),
        Zone("node-1", {GPU: 1}, {GPU: 1}, {GPU: 1}),
    )
    node_topology = NodeTopology("n", "restricted", "container", zones)
    assert place(node_topology, pod("p", {GPU: 2})).reason == "cannot align container"
    healthy = NodeTopology(
        "n", "restricted", "container", tuple(replace(z, capacity=z.allocatable) for z in zones)
    )
    assert place(healthy, pod("p", {GPU: 2})).widest == 2


def test_container_scope_takes_devices_container_by_container() -> None:
    # Each container fits one zone; together they take both, so a third GPU request finds none free.
    placed = place(topology("n", TWO_ZONES), two_containers({CPU: 6, GPU: 1}, {CPU: 6, GPU: 1})).topology
    assert placed is not None
    assert [dict(z.available) for z in placed.zones] == [{CPU: 2, GPU: 0}, {CPU: 2, GPU: 0}]
    assert placed.accounted == {"default/p"}
    assert place(placed, pod("q", {GPU: 1})).reason == "cannot align container"


def test_pod_scope_aligns_the_whole_pod() -> None:
    both = two_containers({CPU: 6, GPU: 1}, {CPU: 6, GPU: 1})
    assert place(topology("n", TWO_ZONES, scope="pod"), both).reason == "cannot align pod"
    small = two_containers({CPU: 3}, {CPU: 3, GPU: 1})
    placed = place(topology("n", TWO_ZONES, scope="pod"), small).topology
    assert placed is not None and [z.available[CPU] for z in placed.zones] == [2, 8]


def test_init_containers_are_checked_but_give_their_devices_back() -> None:
    p = Pod(
        "p",
        init_containers=(Container("init", limits={CPU: 8, GPU: 1}),),
        containers=(Container("main", limits={CPU: 8, GPU: 1}),),
    )
    placed = place(topology("n", TWO_ZONES), p).topology
    assert placed is not None and [z.available[GPU] for z in placed.zones] == [0, 1]
    too_big = Pod("q", init_containers=(Container("init", limits={CPU: 9, GPU: 1}),))
    assert place(topology("n", TWO_ZONES), too_big).reason == "cannot align init container"


def test_engine_binds_only_where_the_pod_aligns_and_tells_why_not() -> None:
    scheduler, clock, binder = engine()
    for name in ("split", "together"):
        scheduler.add_node(node(name, {CPU: 16, GPU: 2}))
    # "split" has its two GPUs on zone 1 and its CPUs spread 4/12; "together" has 8+8 and a GPU per zone.
    scheduler.update_topology(topology("split", [{CPU: 12}, {CPU: 4, GPU: 2}]))
    scheduler.update_topology(topology("together", TWO_ZONES))
    scheduler.add_pod(pod("too-wide", {CPU: 10, GPU: 1}))
    outcomes = {o.pod.name: o for o in iter(scheduler.schedule_one, None)}
    scheduler.add_pod(pod("aligned", {CPU: 8, GPU: 1}))
    outcomes |= {o.pod.name: o for o in iter(scheduler.schedule_one, None)}
    assert outcomes["aligned"].node == "together"
    assert outcomes["too-wide"].node is None
    assert outcomes["too-wide"].message.startswith("0/2 nodes are available: 2 cannot align container.")
    assert binder.bound == [("default/aligned", "together")]
    # The bound pod is replayed on "together" until its topology accounts for it: a second aligned pod
    # takes the other zone, a third finds no zone with 8 CPUs and a GPU.
    scheduler.add_pod(pod("aligned-2", {CPU: 8, GPU: 1}))
    scheduler.add_pod(pod("aligned-3", {CPU: 8, GPU: 1}))
    later = {o.pod.name: o.node for o in iter(scheduler.schedule_one, None)}
    assert later == {"aligned-2": "together", "aligned-3": None}
    # "aligned" ends and the node publishes zone 0 free again: the waiting pod is retried and placed.
    scheduler.remove_pod(pod("aligned", {CPU: 8, GPU: 1}, node_name="together"))
    zones = (
        Zone("node-0", {CPU: 8, GPU: 1}, {CPU: 8, GPU: 1}),
        Zone("node-1", {CPU: 8, GPU: 1}, {CPU: 0, GPU: 0}),
    )
    scheduler.update_topology(
        NodeTopology("together", "single-numa-node", "container", zones, frozenset({"default/aligned-2"}))
    )
    clock.set(clock.now() + 60)  # past the pod's backoff
    retried = {o.pod.name: o.node for o in iter(scheduler.schedule_one, None)}
    assert retried == {"aligned-3": "together", "too-wide": None}


def test_score_prefers_the_node_where_the_pod_is_narrowest() -> None:
    scheduler, _, _ = engine()
    for name in ("wide", "narrow"):
        scheduler.add_node(node(name, {CPU: 16, GPU: 2}))
    scheduler.update_topology(topology("wide", [{CPU: 6, GPU: 1}, {CPU: 10, GPU: 1}], "best-effort"))
    scheduler.update_topology(topology("narrow", [{CPU: 16, GPU: 2}, {}], "best-effort"))
    scheduler.add_pod(pod("p", {CPU: 12, GPU: 1}))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "narrow"


def test_simulator_shows_the_same_decisions(tmp_path: Path) -> None:
    result = simulate(read_cluster(ROOT / "examples" / "clusters" / "numa.yaml"))
    placed = {p.pod: (p.node, p.message) for p in result.pods}
    assert placed["ml/aligned-1"][0] in ("numa-a", "numa-b") and placed["ml/aligned-2"][0] in (
        "numa-a",
        "numa-b",
    )
    assert placed["ml/wide"][0] is None and "2 cannot align container" in placed["ml/wide"][1]
    gpus = sum(res[GPU][0] for usage in result.nodes.values() for res in usage.zones.values() if GPU in res)
    assert gpus == 2  # four GPUs, two taken
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "kind: NodeResourceTopology\nmetadata: {name: x}\n"
        "attributes: [{name: topologyManagerScope, value: node}]\n"
    )
    assert any("unknown scope 'node'" in e for e in read_cluster(bad).errors)
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "scheduler",
            "simulate",
            "--cluster",
            "examples/clusters/numa.yaml",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "cannot align container" in cli.stdout and "NUMA ZONE" in cli.stdout
