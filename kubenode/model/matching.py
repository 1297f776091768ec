"""Node selectors, node affinity terms, taints and tolerations, with Kubernetes' matching rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kubenode.model.objects import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration


def _requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    value = labels.get(req.key, "")
    if req.operator == "In":
        return present and value in req.values
    if req.operator == "NotIn":
        return not present or value not in req.values
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    if req.operator in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if req.operator == "Gt" else have < want
    return False


def term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """Expressions and fields of one term are ANDed; an empty term matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    fields = {"metadata.name": node.name}
    return all(_requirement_matches(r, node.labels) for r in term.match_expressions) and all(
        _requirement_matches(r, fields) for r in term.match_fields
    )


def matches_node_selector_and_affinity(pod: Pod, node: Node) -> bool:
    """spec.nodeSelector (every label equal) AND required node affinity (terms ORed)."""
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    terms = pod.required_node_affinity
    return terms is None or any(term_matches(term, node) for term in terms)


def preferred_affinity_weight(pod: Pod, node: Node) -> int:
    """Sum of the weights of the preferred terms the node matches."""
    return sum(p.weight for p in pod.preferred_node_affinity if term_matches(p.preference, node))


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    # An empty key with Equal cannot match (API validation forbids it).
    return bool(toleration.key) and toleration.value == taint.value


def untolerated_taints(
    tolerations: Iterable[Toleration], taints: Iterable[Taint], effects: set[str]
) -> list[Taint]:
    """The taints with one of the given effects that no toleration tolerates."""
    tolerations = tuple(tolerations)
    return [t for t in taints if t.effect in effects and not any(tolerates(tol, t) for tol in tolerations)]
