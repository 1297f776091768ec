"""The kubelet's node flags, read and checked: --node-labels, --register-with-taints, --*-reserved.

Each parser takes the flag's text (or, from the config file, a mapping/list) and returns plain
values; a bad entry raises ValidationError naming the flag (or config key) and the entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubenode.model import ValidationError
from kubenode.model.quantity import QuantityError, to_amount
from kubenode.model.resources import qualified_name_problem

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# The labels in the kubernetes.io and k8s.io namespaces a node may set on itself, as the kubelet checks its
# --node-labels (k8s.io/kubelet pkg/apis/well_known_labels.go IsKubeletLabel, cmd/kubelet/app/options):
# NodeRestriction refuses any other (node-restriction.kubernetes.io/, node-role.kubernetes.io/, ...), so an
# agent started with one would retry registering its Node forever.
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "kubernetes.io/os",
    "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
})  # fmt: skip
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _in_namespace(namespace: str, parent: str) -> bool:
    return namespace == parent or namespace.endswith("." + parent)


def is_allowed_node_label(key: str) -> bool:
    """Whether a node may set this label on its own Node (any label outside kubernetes.io and k8s.io)."""
    namespace = key.split("/", 1)[0] if "/" in key else ""
    if not (_in_namespace(namespace, "kubernetes.io") or _in_namespace(namespace, "k8s.io")):
        return True
    return key in KUBELET_LABELS or any(_in_namespace(namespace, n) for n in KUBELET_LABEL_NAMESPACES)


def _pairs(value: Any, source: str, key: str) -> dict[str, str]:
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if not isinstance(value, str):
        raise ValidationError(source, key, f"must be key=value pairs, got {value!r}")
    result = {}
    for item in value.split(","):
        name, sep, val = item.strip().partition("=")
        if not sep or not name:
            raise ValidationError(source, key, f"{item.strip()!r} is not key=value")
        result[name.strip()] = val.strip()
    return result


def parse_node_labels(value: Any, source: str = "command line", key: str = "nodeLabels") -> dict[str, str]:
    labels = _pairs(value, source, key)
    for name, val in labels.items():
        problem = qualified_name_problem(name)
        if problem:
            raise ValidationError(source, key, f"invalid label key {name!r}: {problem}")
        if not is_allowed_node_label(name):
            raise ValidationError(
                source, key,
                f"{name!r}: a node may set kubernetes.io and k8s.io labels only with the prefixes "
                f"{', '.join(KUBELET_LABEL_NAMESPACES)} or from the set {', '.join(sorted(KUBELET_LABELS))} "
                "(NodeRestriction refuses the others)",
            )  # fmt: skip
        if len(val) > 63 or (val and not (val[0].isalnum() and val[-1].isalnum())):
            raise ValidationError(source, key, f"invalid label value {val!r} for {name}")
    return labels


def parse_taints(value: Any, source: str = "command line", key: str = "registerWithTaints") -> list[str]:
    """key[=value]:Effect entries, as --register-with-taints takes them; returned as written."""
    if value is None or value == "":
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    result = []
    for raw in items:
        item = str(raw).strip()
        head, sep, effect = item.rpartition(":")
        name = head.partition("=")[0]
        if not sep or effect not in TAINT_EFFECTS:
            raise ValidationError(
                source,
                key,
                f"{item!r} must be key[=value]:Effect with Effect one of {', '.join(TAINT_EFFECTS)}",
            )
        problem = qualified_name_problem(name)
        if problem:
            raise ValidationError(source, key, f"invalid taint key {name!r}: {problem}")
        result.append(item)
    return result


def taint_json(taint: str) -> dict[str, str]:
    head, _, effect = taint.rpartition(":")
    name, sep, val = head.partition("=")
    return {"key": name, "effect": effect, **({"value": val} if sep else {})}


def parse_reserved(value: Any, source: str = "command line", key: str = "systemReserved") -> dict[str, int]:
    """cpu=500m,memory=1Gi,... as integer amounts (millicores for cpu, bytes otherwise)."""
    result = {}
    for name, quantity in _pairs(value, source, key).items():
        try:
            result[name] = to_amount(name, quantity)
        except QuantityError as exc:
            raise ValidationError(source, key, f"{name}={quantity}: {exc}") from None
        if result[name] < 0:
            raise ValidationError(source, key, f"{name}={quantity}: must not be negative")
    return result
