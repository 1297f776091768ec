"""The scheduler extender HTTP API's JSON, as kube-scheduler writes and reads it.

Types from `k8s.io/kube-scheduler/extender/v1` (types.go). They carry no json tags, so the
keys are the Go field names:
- ExtenderArgs          {Pod, Nodes (a v1.NodeList, when not nodeCacheCapable), NodeNames}
- ExtenderFilterResult  {Nodes, NodeNames, FailedNodes {name: reason},
                         FailedAndUnresolvableNodes {name: reason}, Error}
- HostPriorityList      [{Host, Score}]  with Score 0..MaxExtenderPriority (10)
- ExtenderBindingArgs   {PodName, PodNamespace, PodUID, Node}
- ExtenderBindingResult {Error}
Go's decoder matches keys case-insensitively, so `get` here does too (an extender written
against lower-case keys still works); what we write always uses the exact Go names.
Both the calling side (`scheduler.extenders`) and the serving side (`scheduler.extender`)
build and read the bodies through this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

POD, NODES, NODE_NAMES = "Pod", "Nodes", "NodeNames"
FAILED_NODES, FAILED_AND_UNRESOLVABLE, ERROR = "FailedNodes", "FailedAndUnresolvableNodes", "Error"
HOST, SCORE = "Host", "Score"
POD_NAME, POD_NAMESPACE, POD_UID, NODE = "PodName", "PodNamespace", "PodUID", "Node"
MAX_EXTENDER_PRIORITY = 10


class BadBody(ValueError):
    """A request or response body that is not the extender type it should be."""


def get(obj: Mapping[str, Any], key: str) -> Any:
    """obj[key], matching the key case-insensitively as Go's encoding/json does."""
    if key in obj:
        return obj[key]
    lowered = key.lower()
    for name, value in obj.items():
        if isinstance(name, str) and name.lower() == lowered:
            return value
    return None


def mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise BadBody(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    # set(map(type, ...)) runs in C: kube sends thousands of names for every pod.
    if not isinstance(value, list) or not set(map(type, value)) <= {str}:
        raise BadBody(f"{what} must be a list of strings")
    return value


def reasons(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not set(map(type, value.values())) <= {str}:
        raise BadBody(f"{what} must be a map of node name to reason")
    return dict(value)


def node_list(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A v1.NodeList as Go marshals kube's `&v1.NodeList{Items: ...}` (empty TypeMeta omitted)."""
    return {"metadata": {}, "items": list(nodes)}


def extender_args(
    pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]] | None, names: Sequence[str] | None
) -> dict[str, Any]:
    """ExtenderArgs: NodeNames for a nodeCacheCapable extender, else the full Nodes (the other nil)."""
    return {
        POD: pod,
        NODES: None if nodes is None else node_list(nodes),
        NODE_NAMES: None if names is None else list(names),
    }


def filter_result(
    names: Sequence[str] | None,
    nodes: Sequence[Mapping[str, Any]] | None,
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    error: str = "",
) -> dict[str, Any]:
    return {
        NODES: None if nodes is None else node_list(nodes),
        NODE_NAMES: None if names is None else list(names),
        FAILED_NODES: dict(failed),
        FAILED_AND_UNRESOLVABLE: dict(unresolvable),
        ERROR: error,
    }


def host_priorities(scores: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{HOST: host, SCORE: score} for host, score in scores]


def binding_args(name: str, namespace: str, uid: str, node: str) -> dict[str, str]:
    return {POD_NAME: name, POD_NAMESPACE: namespace, POD_UID: uid, NODE: node}


def binding_result(error: str = "") -> dict[str, str]:
    return {ERROR: error}


def node_items(body: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The Node objects of an ExtenderArgs or ExtenderFilterResult (None if Nodes is null)."""
    nodes = get(body, NODES)
    if nodes is None:
        return None
    items = get(mapping(nodes, NODES), "items") or []
    if not isinstance(items, list):
        raise BadBody("Nodes.items must be a list")
    return [mapping(item, "Nodes.items[]") for item in items]


def node_name(node: Mapping[str, Any]) -> str:
    name = mapping(node.get("metadata") or {}, "Nodes.items[].metadata").get("name")
    if not isinstance(name, str):
        raise BadBody("Nodes.items[].metadata.name must be a string")
    return name


def passed_names(result: Mapping[str, Any], node_cache_capable: bool) -> list[str]:
    """The node names an ExtenderFilterResult lets through (from NodeNames or Nodes.items)."""
    if node_cache_capable:
        return strings(get(result, NODE_NAMES), NODE_NAMES)
    return [node_name(node) for node in node_items(result) or []]


def parse_priorities(body: Any) -> list[tuple[str, int]]:
    if body is None:
        return []
    if not isinstance(body, list):
        raise BadBody("HostPriorityList must be a JSON list")
    scores = []
    for item in body:
        entry = mapping(item, "HostPriorityList[]")
        host, score = get(entry, HOST), get(entry, SCORE)
        if not isinstance(host, str) or isinstance(score, bool) or not isinstance(score, int):
            raise BadBody("HostPriorityList[] needs a string Host and an integer Score")
        scores.append((host, score))
    return scores
