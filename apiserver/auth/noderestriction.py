"""NodeRestriction admission: what a node user (`system:node:<n>`) may write, judged on old and new object.

The authorizer already limited a node to the verbs of the Node authorizer; this decides on the objects, as
kube's plugin/pkg/admission/noderestriction does:
- pods: create and delete only mirror pods (annotation `kubernetes.io/config.mirror`) bound to itself; status
  and eviction only for pods bound to itself;
- nodes: only its own Node; no deleting it, no taint changes, no `node-restriction.kubernetes.io/` labels;
- leases: only `kube-node-lease/<n>`.
`admit` returns kube's 403 message (`pods "x" is forbidden: node "a" can only ...`) or None to admit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.auth import UserInfo, node_name_of
from apiserver.request import RequestInfo

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
RESTRICTED_LABEL_DOMAIN = "node-restriction.kubernetes.io"


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not obj:
        return {}
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not obj:
        return {}
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _forbidden(info: RequestInfo, name: str, why: str) -> str:
    qualified = f"{info.resource}.{info.api_group}" if info.api_group else info.resource
    subject = f'{qualified} "{name}"' if name else qualified
    return f"{subject} is forbidden: {why}"


def admit(
    user: UserInfo, info: RequestInfo, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> str | None:
    node = node_name_of(user)
    if node is None or not info.is_resource_request:
        return None
    name = info.name or str(_meta(new).get("name") or _meta(old).get("name") or "")
    why: str | None = None
    if info.api_group == "" and info.resource == "pods":
        why = _pod(node, info, old, new)
    elif info.api_group == "" and info.resource == "nodes":
        why = _node(node, info, name, old, new)
    elif info.api_group == "coordination.k8s.io" and info.resource == "leases":  # noqa: SIM102
        if info.verb in ("create", "update", "patch", "delete") and (
            name != node or info.namespace != "kube-node-lease"
        ):
            why = "can only access node lease with the same name as the requesting node"
    return None if why is None else _forbidden(info, name, why)


def _bound_to(obj: Mapping[str, Any] | None, node: str) -> bool:
    return _spec(obj).get("nodeName") == node


def _pod(
    node: str, info: RequestInfo, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> str | None:
    if info.subresource == "":
        if info.verb == "create":
            if MIRROR_ANNOTATION not in (_meta(new).get("annotations") or {}):
                why = f'pod does not have "{MIRROR_ANNOTATION}" annotation, node "{node}"'
                return why + " can only create mirror pods"
            if not _bound_to(new, node):
                return f'node "{node}" can only create pods with spec.nodeName set to itself'
            return None
        if info.verb == "delete":
            if not _bound_to(old, node):
                return f'node "{node}" can only delete pods with spec.nodeName set to itself'
            return None
        if info.verb in ("update", "patch"):
            return f'node "{node}" can only update pod status'
        return None
    if info.subresource == "status":
        if not _bound_to(old, node):
            return f'node "{node}" can only update pod status for pods with spec.nodeName set to itself'
        return None
    if info.subresource == "eviction":
        if not _bound_to(old, node):
            return f'node "{node}" can only evict pods with spec.nodeName set to itself'
        return None
    return f'node "{node}" cannot write pods/{info.subresource}'


def _taints(obj: Mapping[str, Any] | None) -> list[Any]:
    taints = _spec(obj).get("taints")
    return list(taints) if isinstance(taints, list) else []


def _restricted_labels(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    labels = _meta(obj).get("labels") or {}
    return {
        k: v
        for k, v in labels.items()
        if k.split("/", 1)[0] == RESTRICTED_LABEL_DOMAIN
        or k.split("/", 1)[0].endswith("." + RESTRICTED_LABEL_DOMAIN)
    }


def _node(
    node: str, info: RequestInfo, name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> str | None:
    if name != node:
        return f'node "{node}" is not allowed to modify node "{name}"'
    if info.verb == "delete":
        return f'node "{node}" is not allowed to delete nodes'
    if info.verb == "create":
        # A node may register with taints and with its own labels, but not with restricted ones.
        bad = sorted(_restricted_labels(new))
        if bad:
            return f'node "{node}" is not allowed to set the following labels: {", ".join(bad)}'
        return None
    if old is not None and new is not None:
        if _taints(old) != _taints(new):
            return f'node "{node}" is not allowed to modify taints'
        before, after = _restricted_labels(old), _restricted_labels(new)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if changed:
            return f'node "{node}" is not allowed to modify labels: {", ".join(changed)}'
    return None
