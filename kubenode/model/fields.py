"""Typed access to decoded JSON/YAML with errors that carry the field path.

Known field names come from the official Kubernetes client's models (or, for files
kubenode reads only in part, such as scheduler profiles, a list of supported keys), so
an unknown (for example misspelt) field is reported instead of silently ignored, as
the API server's strict decoding does.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from kubenode.model.errors import ValidationError, echo


@functools.cache
def known_fields(model_name: str) -> frozenset[str]:
    """The JSON field names of a kubernetes.client model, e.g. "V1Container".

    From the generated table (tools/genfields.py) for the models kubenode parses: importing the client
    costs every process that reads a manifest ~30 MiB. Other models still come from the client."""
    from kubenode.model.k8sfields import FIELDS

    if model_name in FIELDS:
        return FIELDS[model_name]
    import kubernetes.client

    model = getattr(kubernetes.client, model_name)
    return frozenset(
        (info.serialization_alias or info.alias or name) for name, info in model.model_fields.items()
    )


class Fields:
    """One JSON object being read, with its location for error messages."""

    def __init__(
        self,
        source: str,
        path: str,
        value: object,
        model: str | None = None,
        *,
        allowed: tuple[str, ...] | None = None,
    ) -> None:
        if not isinstance(value, Mapping):
            raise ValidationError(source, path, f"must be an object, got {type(value).__name__}")
        self.source = source
        self.path = path
        self.data: Mapping[str, Any] = value
        if model is not None:
            unknown = sorted(str(k) for k in value if k not in known_fields(model))
            if unknown:
                raise ValidationError(source, self.at(unknown[0]), "unknown field")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.error(
                        str(key), f"unknown or unsupported field (supported: {', '.join(allowed)})"
                    )

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, message: str) -> ValidationError:
        return ValidationError(self.source, self.at(key), message)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def string(self, key: str, default: str = "") -> str:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {echo(value)}")
        return value

    def integer(self, key: str, default: int) -> int:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {echo(value)}")
        return value

    def boolean(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {echo(value)}")
        return value

    def child(self, key: str, model: str | None = None, *, allowed: tuple[str, ...] | None = None) -> Fields:
        """A nested object; a missing one reads as empty."""
        value = self.data.get(key)
        return Fields(self.source, self.at(key), {} if value is None else value, model, allowed=allowed)

    def children(
        self, key: str, model: str | None = None, *, allowed: tuple[str, ...] | None = None
    ) -> list[Fields]:
        """A list of objects; a missing list reads as empty."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(key, "must be a list")
        return [
            Fields(self.source, f"{self.at(key)}[{i}]", item, model, allowed=allowed)
            for i, item in enumerate(value)
        ]

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "must be a list of strings")
        return tuple(value)

    def string_map(self, key: str) -> dict[str, str]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(key, "must be a map of strings")
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValidationError(self.source, f"{self.at(key)}.{k}", f"must be a string, got {echo(v)}")
        return dict(value)
