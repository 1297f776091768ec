"""NodeRestriction admission: what a node user (`system:node:<n>`) may write, judged on old and new object.

The authorizer already limited a node to the verbs of the Node authorizer; this decides on the objects, as
kube's plugin/pkg/admission/noderestriction does:
- pods: create and delete only mirror pods (annotation `kubernetes.io/config.mirror`) bound to itself; status
  and eviction only for pods bound to itself;
- nodes: only its own Node; no deleting it, no taint changes, no `node-restriction.kubernetes.io/` labels
  and no other kubernetes.io / k8s.io labels than the kubelet's own (hostname, os, arch, zone, ...);
- leases: only `kube-node-lease/<n>`;
- serviceaccounts/token (`token_refusal`): only tokens bound to a pod (with its uid) that runs on itself,
  for the audiences that pod's projected volumes name.
- resourceslices (resource.k8s.io): create, update, delete (one or a collection) only slices whose
  `spec.nodeName` is the node, before and after.
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


WRITES = ("create", "update", "patch", "delete")
_VERB_TEXT = {"patch": "update", "deletecollection": "delete"}
SLICE_WRITES = (*WRITES, "deletecollection")  # judged per slice, as the collection's DELETE admits each


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
    elif info.api_group == "coordination.k8s.io" and info.resource == "leases":
        if info.verb in ("create", "update", "patch", "delete") and (
            name != node or info.namespace != "kube-node-lease"
        ):
            why = "can only access node lease with the same name as the requesting node"
    elif (
        info.api_group == "resource.k8s.io"
        and info.resource == "resourceslices"
        and info.verb in SLICE_WRITES
    ):
        # kube's NodeRestriction for slices: only those whose nodeName is the node's own.
        if any(obj is not None and _spec(obj).get("nodeName") != node for obj in (old, new)):
            verb = _VERB_TEXT.get(info.verb, info.verb)
            why = f"can only {verb} ResourceSlice with the same NodeName as the requesting node"
    elif info.resource == "noderesourcetopologies" and info.verb in WRITES and name != node:
        # kubenode: a node writes only its own NodeResourceTopology
        why = f'node "{node}" can only write the NodeResourceTopology named after itself'
    return None if why is None else _forbidden(info, name, why)


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _claim_statuses(status: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    return [
        (s.get("name"), s.get("resourceClaimName"))
        for s in status.get("resourceClaimStatuses") or []
        if isinstance(s, Mapping)
    ]


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
            return _mirror_pod_problem(node, new)
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
        if new is None or old is None:
            return None
        if (_meta(old).get("labels") or {}) != (_meta(new).get("labels") or {}):
            return f'node "{node}" cannot update labels through pod status'
        # kube's admitPodStatus: the claims a pod's status names widen the node's access (the Node
        # authorizer's graph follows them), so a node may not change them (kube's text, its typo too).
        before, after = _status(old), _status(new)
        if _claim_statuses(before) != _claim_statuses(after):
            return f'node "{node}" cannot update resource claim statues'
        if before.get("extendedResourceClaimStatus") != after.get("extendedResourceClaimStatus"):
            return f'node "{node}" cannot update extended resource claim status'
        key = "nodeAllocatableResourceClaimStatuses"
        if (before.get(key) or []) != (after.get(key) or []):
            return f'node "{node}" cannot update node allocatable resource claim statuses'
        return None
    if info.subresource == "eviction":
        if not _bound_to(old, node):
            return f'node "{node}" can only evict pods with spec.nodeName set to itself'
        return None
    return f'node "{node}" cannot write pods/{info.subresource}'


def _mirror_pod_problem(node: str, pod: Mapping[str, Any] | None) -> str | None:
    """kube's admitPodCreate after the annotation check: owned by this Node, referencing no API objects (the
    owner's uid is not compared: admission here does not read the Node)."""
    owners = _meta(pod).get("ownerReferences") or []
    if len(owners) > 1:
        return f'node "{node}" can only create pods with a single owner reference set to itself'
    owner = owners[0] if owners and isinstance(owners[0], Mapping) else {}
    if (owner.get("apiVersion"), owner.get("kind"), owner.get("name")) != ("v1", "Node", node):
        return f'node "{node}" can only create pods with an owner reference set to itself'
    referenced = referenced_api_object(_spec(pod))
    return f'node "{node}" can not create pods that reference {referenced}' if referenced else None


VOLUME_REFERENCES = {
    "secret": "secrets",
    "configMap": "configmaps",
    "persistentVolumeClaim": "persistentvolumeclaims",
    "ephemeral": "persistentvolumeclaims",
}
PROJECTION_REFERENCES = {
    "secret": "secrets",
    "configMap": "configmaps",
    "serviceAccountToken": "serviceaccounts",
    "clusterTrustBundle": "clustertrustbundles",
}


def referenced_api_object(spec: Mapping[str, Any]) -> str | None:
    """The first kind of API object a pod spec refers to (kube's podReferencesAPIObjects), or None."""
    if spec.get("serviceAccountName"):
        return "serviceaccounts"
    for volume in spec.get("volumes") or []:
        for key, kind in VOLUME_REFERENCES.items():
            if volume.get(key):
                return kind
        for source in (volume.get("projected") or {}).get("sources") or []:
            for key, kind in PROJECTION_REFERENCES.items():
                if source.get(key):
                    return kind
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    containers += spec.get("ephemeralContainers") or []
    for container in containers:
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if source.get("secretKeyRef"):
                return "secrets"
            if source.get("configMapKeyRef"):
                return "configmaps"
        for env_from in container.get("envFrom") or []:
            if env_from.get("secretRef"):
                return "secrets"
            if env_from.get("configMapRef"):
                return "configmaps"
    if spec.get("resourceClaims"):
        return "resourceclaims"
    return None


def _taints(obj: Mapping[str, Any] | None) -> list[Any]:
    taints = _spec(obj).get("taints")
    return list(taints) if isinstance(taints, list) else []


# kubeletapis: the kubernetes.io / k8s.io labels a kubelet may set on its own Node.
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    }
)  # fmt: skip
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _label_namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def forbidden_label(key: str) -> bool:
    """kube's getForbiddenLabels: node-restriction labels, and kubernetes.io/k8s.io ones not the kubelet's."""
    namespace = _label_namespace(key)
    if namespace == RESTRICTED_LABEL_DOMAIN or namespace.endswith("." + RESTRICTED_LABEL_DOMAIN):
        return True
    kube = any(namespace == d or namespace.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    kubelet = key in KUBELET_LABELS or any(
        namespace == d or namespace.endswith("." + d) for d in KUBELET_LABEL_NAMESPACES
    )
    return kube and not kubelet


def _labels(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    labels = _meta(obj).get("labels")
    return dict(labels) if isinstance(labels, Mapping) else {}


def _node(
    node: str, info: RequestInfo, name: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> str | None:
    if name != node:
        return f'node "{node}" is not allowed to modify node "{name}"'
    if info.verb == "delete":
        return f'node "{node}" is not allowed to delete nodes'
    if info.verb == "create":
        # A node may register with taints, and with labels outside the reserved namespaces.
        bad = sorted(k for k in _labels(new) if forbidden_label(k))
        if bad:
            return f'node "{node}" is not allowed to set the following labels: {", ".join(bad)}'
        return None
    if old is not None and new is not None:
        if _taints(old) != _taints(new):
            return f'node "{node}" is not allowed to modify taints'
        before, after = _labels(old), _labels(new)
        changed = sorted(
            k for k in set(before) | set(after) if before.get(k) != after.get(k) and forbidden_label(k)
        )
        if changed:
            return (
                f"is not allowed to modify labels: {', '.join(changed)}"  # kube's text has no node name here
            )
    return None


def _pod_audiences(pod: Mapping[str, Any], api_audiences: tuple[str, ...]) -> set[str]:
    """The audiences a pod's `serviceAccountToken` projections ask for (none named: the API audiences)."""
    found: set[str] = set()
    for volume in _spec(pod).get("volumes") or []:
        for source in (volume.get("projected") or {}).get("sources") or []:
            projection = source.get("serviceAccountToken")
            if isinstance(projection, Mapping):
                audience = projection.get("audience")
                found |= {str(audience)} if audience else set(api_audiences)
    return found


def token_refusal(
    node: str,
    ref: Mapping[str, Any] | None,
    pod: Mapping[str, Any] | None,
    audiences: list[str],
    api_audiences: tuple[str, ...],
) -> str | None:
    """Why node `node` may not have this TokenRequest (kube's admitServiceAccount), or None.

    `pod` is the stored pod `ref` names (the handler looked it up and checked its uid)."""
    if ref is None or ref.get("kind") != "Pod" or not ref.get("name"):
        return "node requested token not bound to a pod"
    if not ref.get("uid"):
        return "node requested token with a pod binding without a uid"
    if pod is None or _spec(pod).get("nodeName") != node:
        return "node requested token bound to a pod scheduled on a different node"
    allowed = _pod_audiences(pod, api_audiences)
    for audience in audiences:
        if audience not in allowed:
            return (
                f'audience "{audience}" not found in pod spec volume, system:node:{node} '
                "is not authorized to request tokens for this audience"
            )
    return None
