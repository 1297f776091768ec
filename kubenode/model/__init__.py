"""The one internal model of pods, nodes and resources shared by the agent and the scheduler.

- `errors`: `ValidationError`, which names the source (file), the field path and the problem.
- `quantity`: Kubernetes quantities to integers (milli-CPU for cpu, base units otherwise) and back.
- `resources`: resource names (native or extended, per the kubelet's rules) and resource-list math.
- `objects`: the dataclasses (`Pod`, `Container`, `Node`, ...); a Pod caches its requests, limits, QoS class.
- `parse`: Pod and Node objects from decoded YAML/JSON, with the API server's defaults and validation.
- `documents`: decoding YAML/JSON files that hold one or many objects (multi-document, `kind: List`).
- `requests`: pod-level requests and limits as kube's resource helpers compute them, and the QoS class;
  below `objects`, which it reads only through structural types.
- `matching`: node selectors, node affinity terms, taints and tolerations.
"""

from typing import TYPE_CHECKING, Any

from kubenode.model.errors import ValidationError
from kubenode.model.objects import (
    Container,
    EnvVar,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
)
from kubenode.model.requests import QOSClass, pod_limits, pod_requests, qos_class

if TYPE_CHECKING:
    from kubenode.model.parse import parse_node, parse_pod

__all__ = [
    "Container",
    "EnvVar",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "Pod",
    "PreferredSchedulingTerm",
    "QOSClass",
    "Taint",
    "Toleration",
    "ValidationError",
    "parse_node",
    "parse_pod",
    "pod_limits",
    "pod_requests",
    "qos_class",
]


def __getattr__(name: str) -> Any:
    # The parsers pull in the kubernetes client (for its quantity parsing), about 12 MiB: load
    # them on first use so code that only needs names and dataclasses (the device plugin) stays small.
    if name in ("parse_node", "parse_pod"):
        from kubenode.model import parse

        return getattr(parse, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
