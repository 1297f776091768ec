from __future__ import annotations

from kubenode.model import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration
from kubenode.model.matching import (
    matches_node_selector_and_affinity,
    preferred_affinity_weight,
    tolerates,
    untolerated_taints,
)
from kubenode.model.objects import PreferredSchedulingTerm

NODE = Node("n1", labels={"zone": "a", "gen": "5"})


def term(*reqs: NodeSelectorRequirement) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=reqs)


def test_selector_and_required_affinity() -> None:
    assert matches_node_selector_and_affinity(Pod("p", node_selector={"zone": "a"}), NODE)
    assert not matches_node_selector_and_affinity(Pod("p", node_selector={"zone": "b"}), NODE)
    gt = term(NodeSelectorRequirement("gen", "Gt", ("4",)))
    notin = term(NodeSelectorRequirement("zone", "NotIn", ("a",)))
    assert matches_node_selector_and_affinity(Pod("p", required_node_affinity=(notin, gt)), NODE)
    assert not matches_node_selector_and_affinity(Pod("p", required_node_affinity=(notin,)), NODE)
    by_name = NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n1",)),))
    assert matches_node_selector_and_affinity(Pod("p", required_node_affinity=(by_name,)), NODE)
    assert not matches_node_selector_and_affinity(Pod("p", required_node_affinity=()), NODE)


def test_preferred_weight() -> None:
    prefs = (
        PreferredSchedulingTerm(10, term(NodeSelectorRequirement("zone", "In", ("a",)))),
        PreferredSchedulingTerm(5, term(NodeSelectorRequirement("zone", "Exists"))),
        PreferredSchedulingTerm(7, term(NodeSelectorRequirement("gpu", "Exists"))),
    )
    assert preferred_affinity_weight(Pod("p", preferred_node_affinity=prefs), NODE) == 15


def test_tolerations() -> None:
    taint = Taint("gpu", "NoSchedule", "true")
    assert tolerates(Toleration("gpu", "Equal", "true", "NoSchedule"), taint)
    assert tolerates(Toleration("gpu", "Exists"), taint)
    assert tolerates(Toleration(operator="Exists"), taint)
    assert not tolerates(Toleration("gpu", "Equal", "false"), taint)
    assert not tolerates(Toleration("gpu", "Exists", effect="NoExecute"), taint)
    soft = Taint("slow", "PreferNoSchedule")
    assert untolerated_taints([], [taint, soft], {"NoSchedule", "NoExecute"}) == [taint]
