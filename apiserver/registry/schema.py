"""Decoding checks from the official client's model types: unknown fields, wrong JSON types, times.

kube-apiserver decodes a body into Go structs: a field of the wrong JSON type is a 400, an
unknown field is dropped (fieldValidation Ignore/Warn) or a 400 (Strict), and `metav1.Time`
is re-encoded at whole seconds while `metav1.MicroTime` keeps exactly six fractional digits.
`decode` does the same walk over the `kubernetes` client's pydantic models, so no schema is
written by hand; only which times are MicroTime is listed here (the models say datetime for both).
"""

from __future__ import annotations

import datetime
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

import kubernetes.client

# Paths (dotted, list indices removed) whose type is metav1.MicroTime.
MICROTIME_FIELDS = frozenset({"spec.acquireTime", "spec.renewTime", "eventTime", "series.lastObservedTime"})


def format_time(moment: datetime.datetime) -> str:
    """metav1.Time: RFC 3339 at whole seconds, UTC."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_microtime(moment: datetime.datetime) -> str:
    """metav1.MicroTime: always six fractional digits (Go decodes it with a fixed layout)."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime.datetime | None:
    """RFC 3339 with any (or no) fraction and any offset; None when unreadable."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment


def _strip(annotation: Any) -> Any:
    """Drop Optional[...] and Annotated[...] around a type."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return ("union", tuple(_strip(a) for a in args))
            annotation = args[0]
        else:
            return annotation


@functools.cache
def _fields(model: Any) -> dict[str, Any]:
    fields: Any = model.model_fields
    return {
        (info.serialization_alias or info.alias or name): _strip(info.annotation)
        for name, info in fields.items()
    }


class DecodeError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "null"


def _walk(value: Any, annotation: Any, path: str, plain: str, unknown: list[str]) -> Any:
    """Check one value; returns it, normalized (times)."""
    if value is None:
        return None
    if isinstance(annotation, tuple) and annotation and annotation[0] == "union":
        return value  # IntOrString and the like: any scalar goes
    origin = typing.get_origin(annotation)
    if annotation is Any or annotation is object:
        return value
    if origin in (list, typing.List):  # noqa: UP006
        if not isinstance(value, list):
            raise DecodeError(path, f"expected array, got {_type_name(value)}")
        (item_type,) = typing.get_args(annotation) or (Any,)
        return [_walk(item, item_type, f"{path}[{i}]", plain, unknown) for i, item in enumerate(value)]
    if origin in (dict, typing.Dict):  # noqa: UP006
        if not isinstance(value, Mapping):
            raise DecodeError(path, f"expected object, got {_type_name(value)}")
        args = typing.get_args(annotation)
        item_type = args[1] if len(args) == 2 else Any
        return {k: _walk(v, item_type, f"{path}[{k}]", plain, unknown) for k, v in value.items()}
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        if not isinstance(value, Mapping):
            raise DecodeError(path, f"expected object, got {_type_name(value)}")
        known = _fields(annotation)
        result = {}
        for key, item in value.items():
            child_path = f"{path}.{key}" if path else str(key)
            child_plain = f"{plain}.{key}" if plain else str(key)
            if key not in known:
                unknown.append(child_path)
                continue
            if item is None:  # Go drops null pointers (omitempty) when it re-encodes
                continue
            result[key] = _walk(item, known[key], child_path, child_plain, unknown)
        return result
    if annotation is datetime.datetime:
        if not isinstance(value, str):
            raise DecodeError(path, f"expected a time string, got {_type_name(value)}")
        moment = parse_time(value)
        if moment is None:
            raise DecodeError(path, f"parsing time {value!r}: not RFC 3339")
        return format_microtime(moment) if plain in MICROTIME_FIELDS else format_time(moment)
    if annotation is bool:
        if not isinstance(value, bool):
            raise DecodeError(path, f"expected bool, got {_type_name(value)}")
    elif annotation in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(path, f"expected number, got {_type_name(value)}")
        if annotation is int and isinstance(value, float) and not value.is_integer():
            raise DecodeError(path, f"expected integer, got {value}")
    elif annotation is str and (isinstance(value, bool) or not isinstance(value, (str, int, float))):
        # Quantities are typed str in the client but are numbers in many manifests: accept both.
        raise DecodeError(path, f"expected string, got {_type_name(value)}")
    return value


def decode(obj: Mapping[str, Any], model_name: str) -> tuple[dict[str, Any], list[str]]:
    """The object with unknown fields dropped and times normalized, and the unknown field paths.

    Raises DecodeError (path, problem) for a value of the wrong JSON type."""
    unknown: list[str] = []
    model = getattr(kubernetes.client, model_name)
    result = _walk(obj, model, "", "", unknown)
    return result, unknown
