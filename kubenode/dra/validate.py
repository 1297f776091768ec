"""Validation of DRA objects as kube-apiserver does it for selectors: parse, then compile every CEL selector.

For the API server's create/update of DeviceClasses, ResourceClaims and ResourceClaimTemplates
(a 422 naming the field): `validate(kind, obj)` raises ValidationError with the field path of
the first bad part, e.g. `spec.devices.requests[0].exactly.selectors[1].cel.expression:
compilation failed: ...`. The parse errors name their fields already.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubenode.dra.cel import SelectorError, compile_selector
from kubenode.dra.types import PARSERS, DeviceClass, ResourceClaim
from kubenode.model.errors import ValidationError


def _compile(source: str, path: str, expressions: tuple[str, ...]) -> None:
    for i, expression in enumerate(expressions):
        try:
            compile_selector(expression)
        except SelectorError as exc:
            raise ValidationError(source, f"{path}[{i}].cel.expression", str(exc)) from None


def validate(kind: str, obj: Mapping[str, Any], source: str = "") -> None:
    """kind: DeviceClass, ResourceClaim, ResourceClaimTemplate (whose spec.spec is a claim's spec) or
    ResourceSlice."""
    prefix = ""
    if kind == "ResourceClaimTemplate":
        spec = obj.get("spec")
        obj = {
            "metadata": obj.get("metadata"),
            "spec": spec.get("spec") if isinstance(spec, Mapping) else None,
        }
        kind, prefix = "ResourceClaim", "spec."
    try:
        parsed = PARSERS[kind](obj, source)
        if not source:
            source = f"{kind} {parsed.key if isinstance(parsed, ResourceClaim) else parsed.name}"
        if isinstance(parsed, DeviceClass):
            _compile(source, "spec.selectors", parsed.selectors)
        elif isinstance(parsed, ResourceClaim):
            for r, request in enumerate(parsed.requests):
                if request.exactly is not None:
                    path = f"spec.devices.requests[{r}].exactly.selectors"
                    _compile(source, path, request.exactly.selectors)
                for s, (_, selection) in enumerate(request.first_available):
                    _compile(
                        source,
                        f"spec.devices.requests[{r}].firstAvailable[{s}].selectors",
                        selection.selectors,
                    )
    except ValidationError as exc:
        if not prefix:
            raise
        raise ValidationError(exc.source, prefix + exc.field, exc.message) from None
