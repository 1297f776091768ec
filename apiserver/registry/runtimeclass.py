"""node.k8s.io/v1 RuntimeClass: kube's ValidateRuntimeClass and ValidateRuntimeClassUpdate.

The handler names a runtime configuration on the node (a DNS-1123 label) and never changes; the agent maps
a pod's `runtimeClassName` to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import LABEL_MESSAGE, Cause, Strategy, value_repr
from kubenode.model.resources import is_dns1123_label


class RuntimeClassStrategy(Strategy):
    model = "V1RuntimeClass"

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        handler = obj.get("handler")
        if not isinstance(handler, str) or not is_dns1123_label(handler):
            shown = value_repr(handler if isinstance(handler, str) else "")
            return [("handler", "FieldValueInvalid", f"Invalid value: {shown}: {LABEL_MESSAGE}")]
        if old is not None and handler != old.get("handler"):
            return [
                ("handler", "FieldValueInvalid", f"Invalid value: {value_repr(handler)}: field is immutable")
            ]
        return []
