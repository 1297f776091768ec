"""resource.k8s.io/v1 strategies (kube's pkg/registry/resource): DeviceClass, ResourceClaim (with status),
ResourceClaimTemplate and ResourceSlice.

The body is decoded against the official client's models (unknown fields dropped or 400 under strict
validation), then `kubenode.dra.validate` parses it and compiles every CEL selector with kube's device
environment at create and at update; the first bad field comes back as a 422 cause in kube's words
(`spec.selectors[0].cel.expression: Invalid value: "…": compilation failed: …`). A claim's and a
template's spec are immutable, as kube's ValidateResourceClaimUpdate keeps them; a claim's status is
written only through `/status`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import Cause, Strategy, value_repr
from kubenode.dra.validate import validate as validate_dra
from kubenode.model.errors import ValidationError

IMMUTABLE = "field is immutable"


def _value_at(obj: Mapping[str, Any], path: str) -> object:
    """The value a field path such as `spec.selectors[0].cel.expression` names (None where absent)."""
    value: object = obj
    for part in path.replace("]", "").replace("[", ".").split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def dra_causes(kind: str, obj: Mapping[str, Any]) -> list[Cause]:
    """kube's validation of a DRA object's spec as one cause, or none."""
    try:
        validate_dra(kind, obj)
    except ValidationError as exc:
        value = _value_at(obj, exc.field)
        if value is None or value == "":
            return [(exc.field, "FieldValueRequired", f"Required value: {exc.message}")]
        if isinstance(value, str | int | float | bool):
            return [(exc.field, "FieldValueInvalid", f"Invalid value: {value_repr(value)}: {exc.message}")]
        return [(exc.field, "FieldValueInvalid", f"Invalid value: {exc.message}")]
    return []


class _DraStrategy(Strategy):
    immutable_spec = False

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        meta = obj.get("metadata") or {}
        causes = self.check_name(str(meta.get("name") or "")) + self.check_metadata(meta)
        if old is not None and self.immutable_spec and obj.get("spec") != old.get("spec"):
            return [*causes, ("spec", "FieldValueInvalid", f"Invalid value: {IMMUTABLE}")]
        return causes + dra_causes(self.info.kind, obj)


class DeviceClassStrategy(_DraStrategy):
    model = "V1DeviceClass"


class ResourceClaimTemplateStrategy(_DraStrategy):
    model = "V1ResourceClaimTemplate"
    immutable_spec = True


class ResourceClaimStrategy(_DraStrategy):
    model = "ResourceV1ResourceClaim"
    has_status = True
    immutable_spec = True

    def prepare_create(self, obj: dict[str, Any]) -> None:
        obj.pop("status", None)  # kube's PrepareForCreate: status is the scheduler's, via /status


class ResourceSliceStrategy(_DraStrategy):
    model = "V1ResourceSlice"
    field_labels = ("spec.nodeName", "spec.driver")  # kube's resourceslice field selectors

    def index(self, obj: Mapping[str, Any]) -> dict[str, str]:
        spec = obj.get("spec") or {}
        return {
            "spec.nodeName": str(spec.get("nodeName") or ""),
            "spec.driver": str(spec.get("driver") or ""),
        }
