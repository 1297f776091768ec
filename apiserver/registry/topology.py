"""NodeResourceTopology (topology.node.k8s.io/v1alpha2): the per-NUMA-zone resources a node publishes.

Kube serves it as a CRD (k8stopologyawareschedwg/noderesourcetopology-api); the official client has
no model for it, so the body is checked here against the CRD's structure instead: top-level
`attributes` and `topologyPolicies`, and `zones` of {name, type, parent, costs, attributes,
resources: [{name, capacity, allocatable, available}]}. Unknown fields are dropped (warnings; 400
under strict field validation) as the CRD's structural schema prunes them; a wrong JSON type is 400.
Quantities must parse; a zone needs a name and a type (422 otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import Cause, Strategy
from apiserver.registry.schema import DecodeError, decode
from apiserver.status import bad_request
from kubenode.model.quantity import QuantityError, to_fraction

# field -> expected shape: "str", "int", "quantity" (string or integer), a list of a shape, or a dict
_ATTRIBUTE = {"name": "str", "value": "str"}
_COST = {"name": "str", "value": "int"}
_RESOURCE = {"name": "str", "capacity": "quantity", "allocatable": "quantity", "available": "quantity"}
_ZONE = {
    "name": "str",
    "type": "str",
    "parent": "str",
    "costs": [_COST],
    "attributes": [_ATTRIBUTE],
    "resources": [_RESOURCE],
}
_TOP = {"topologyPolicies": ["str"], "attributes": [_ATTRIBUTE], "zones": [_ZONE]}

Shape = str | list[Any] | dict[str, Any]


def _check(value: Any, shape: Shape, path: str, unknown: list[str]) -> Any:
    if isinstance(shape, list):
        if not isinstance(value, list):
            raise DecodeError(path, "expected an array")
        return [_check(item, shape[0], f"{path}[{i}]", unknown) for i, item in enumerate(value)]
    if isinstance(shape, dict):
        if not isinstance(value, Mapping):
            raise DecodeError(path, "expected an object")
        out = {}
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if key not in shape:
                unknown.append(child)
            elif item is not None:
                out[key] = _check(item, shape[key], child, unknown)
        return out
    if shape == "str" and not isinstance(value, str):
        raise DecodeError(path, "expected a string")
    if shape == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise DecodeError(path, "expected an integer")
    if shape == "quantity" and (isinstance(value, bool) or not isinstance(value, str | int)):
        raise DecodeError(path, "expected a quantity")
    return value


class NodeResourceTopologyStrategy(Strategy):
    def decode_body(self, body: object, strict: bool) -> tuple[dict[str, Any], list[str]]:
        if not isinstance(body, Mapping):
            raise bad_request(f"the object provided is unrecognized (must be of type {self.info.kind})")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if kind not in (None, "", self.info.kind) or api_version not in (None, "", self.info.group_version):
            raise bad_request(
                f"the object provided is unrecognized (must be of type {self.info.kind}): "
                f"kind {kind!r} in version {api_version!r}"
            )
        unknown: list[str] = []
        try:
            meta, meta_unknown = decode(body.get("metadata") or {}, "V1ObjectMeta")
            rest = {k: v for k, v in body.items() if k not in ("kind", "apiVersion", "metadata")}
            obj = _check(rest, _TOP, "", unknown)
        except DecodeError as exc:
            raise bad_request(
                f'{self.info.kind} in version "{self.info.version}" cannot be handled as a {self.info.kind}: '
                f"{exc.path}: {exc}"
            ) from None
        unknown = [f"metadata.{p}" for p in meta_unknown] + unknown
        if unknown and strict:
            raise bad_request("strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in unknown))
        obj.update(kind=self.info.kind, apiVersion=self.info.group_version, metadata=meta)
        return obj, [f'unknown field "{path}"' for path in unknown]

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        causes: list[Cause] = []
        for i, zone in enumerate(obj.get("zones") or []):
            for key in ("name", "type"):
                if not zone.get(key):
                    causes.append((f"zones[{i}].{key}", "FieldValueRequired", "Required value"))
            for j, resource in enumerate(zone.get("resources") or []):
                if not resource.get("name"):
                    causes.append((f"zones[{i}].resources[{j}].name", "FieldValueRequired", "Required value"))
                for key in ("capacity", "allocatable", "available"):
                    value = resource.get(key)
                    if value is None:
                        causes.append(
                            (f"zones[{i}].resources[{j}].{key}", "FieldValueRequired", "Required value")
                        )
                        continue
                    try:
                        to_fraction(value)
                    except QuantityError as err:
                        causes.append(
                            (
                                f"zones[{i}].resources[{j}].{key}",
                                "FieldValueInvalid",
                                f'Invalid value: "{value}": {err}',
                            )
                        )
        return causes
