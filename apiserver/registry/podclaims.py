"""kube's validation of a pod's Dynamic Resource Allocation fields (pkg/apis/core/validation).

- `spec.resourceClaims[i]`: a name that is a DNS label and unique in the pod, and exactly one of
  `resourceClaimName` and `resourceClaimTemplateName`, each a DNS subdomain; for a template entry,
  `<pod>-<entry>` must itself make a valid claim name (the claim controller builds on it).
- `containers[].resources.claims[j]` (init containers too): a name, unique per container (with its
  `request`), that is one of the pod's `spec.resourceClaims` names.
The messages are kube's; where kube prints the whole entry as a Go value ("Invalid value:
core.PodResourceClaim{...}"), the value is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import LABEL_MESSAGE, SUBDOMAIN_MESSAGE, Cause, value_repr
from kubenode.model.resources import is_dns1123_label, is_dns1123_subdomain

ONE_OF = "`resourceClaimName`, `resourceClaimTemplateName`"


def _entry_causes(entry: Mapping[str, Any], path: str, pod_name: str, seen: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    name = entry.get("name")
    if not name:
        causes.append((f"{path}.name", "FieldValueRequired", "Required value"))
    elif name in seen:
        causes.append((f"{path}.name", "FieldValueDuplicate", f"Duplicate value: {value_repr(name)}"))
    elif not is_dns1123_label(str(name)):
        causes.append(
            (f"{path}.name", "FieldValueInvalid", f"Invalid value: {value_repr(name)}: {LABEL_MESSAGE}")
        )
    else:
        seen.add(str(name))
        final = f"{pod_name}-{name}"
        if pod_name and entry.get("resourceClaimTemplateName") and not is_dns1123_subdomain(final):
            message = f"Invalid value: {value_repr(final)}: final ResourceClaim name: {SUBDOMAIN_MESSAGE}"
            causes.append((f"{path}.name", "FieldValueInvalid", message))
    direct, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
    if direct and template:
        message = f"Invalid value: at most one of {ONE_OF.replace(', ', ' or ')} may be specified"
        causes.append((path, "FieldValueInvalid", message))
    elif not direct and not template:
        causes.append((path, "FieldValueInvalid", f"Invalid value: must specify one of: {ONE_OF}"))
    for key, value in (("resourceClaimName", direct), ("resourceClaimTemplateName", template)):
        if value and not is_dns1123_subdomain(str(value)):
            message = f"Invalid value: {value_repr(value)}: {SUBDOMAIN_MESSAGE}"
            causes.append((f"{path}.{key}", "FieldValueInvalid", message))
    return causes


def _container_causes(claims: list[Any], path: str, pod_claims: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    keys: set[str] = set()
    for j, claim in enumerate(claims):
        name = claim.get("name") if isinstance(claim, Mapping) else None
        where = f"{path}[{j}]"
        if not name:
            causes.append((where, "FieldValueRequired", "Required value"))
            continue
        key = f"{name}/{claim.get('request')}" if claim.get("request") else str(name)
        if key in keys:
            causes.append((where, "FieldValueDuplicate", f"Duplicate value: {value_repr(name)}"))
        keys.add(key)
        if name not in pod_claims:
            known = ": " + ", ".join(sorted(pod_claims)) if pod_claims else " which is empty"
            message = (
                f"Not found: {value_repr(name)}: must be one of the names in pod.spec.resourceClaims{known}"
            )
            causes.append((where, "FieldValueNotFound", message))
    return causes


def pod_claim_causes(pod: Mapping[str, Any]) -> list[Cause]:
    """The 422 causes of a pod's DRA fields, in kube's order (entries, then containers)."""
    spec = pod.get("spec") or {}
    pod_name = str((pod.get("metadata") or {}).get("name") or "")
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, entry in enumerate(spec.get("resourceClaims") or []):
        if isinstance(entry, Mapping):
            causes += _entry_causes(entry, f"spec.resourceClaims[{i}]", pod_name, seen)
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            claims = (
                ((container.get("resources") or {}).get("claims")) if isinstance(container, Mapping) else None
            )
            if claims:
                causes += _container_causes(claims, f"spec.{key}[{i}].resources.claims", seen)
    return causes
