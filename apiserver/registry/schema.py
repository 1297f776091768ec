"""Decoding checks from the official client's model types: unknown fields, wrong JSON types, times.

kube-apiserver decodes a body into Go structs: a field of the wrong JSON type is a 400, an
unknown field is dropped (fieldValidation Ignore/Warn) or a 400 (Strict), and `metav1.Time`
is re-encoded at whole seconds while `metav1.MicroTime` keeps exactly six fractional digits.
`decode` does the same walk over the `kubernetes` client's pydantic models, so no schema is
written by hand; only which times are MicroTime is listed here (the models say datetime for both).
A spec seen before is not walked again (`_SpecMemo`).
"""

from __future__ import annotations

import datetime
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

import kubernetes.client
import orjson


class _SecondText:
    """The text of the last whole second formatted: a create, a binding's condition and the event of
    one second all carry it, and astimezone + strftime cost ~6 us a call."""

    __slots__ = ("second", "text")

    def __init__(self) -> None:
        self.second: float = float("nan")
        self.text = ""


_last_second = _SecondText()


def format_time(moment: datetime.datetime) -> str:
    """metav1.Time: RFC 3339 at whole seconds, UTC."""
    second = math.floor(moment.timestamp())  # one instant whatever the zone (naive: local, as astimezone)
    last = _last_second
    if second != last.second:
        text = moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        last.second, last.text = second, text
    return last.text


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


@functools.lru_cache(maxsize=4096)
def _normal_time(text: str, micro: bool) -> str | None:
    """A time as Go re-encodes it (None: unreadable). Memoized: the writes of one second (events'
    first and last timestamps, a burst of conditions) carry the same few texts."""
    moment = parse_time(text)
    if moment is None:
        return None
    return format_microtime(moment) if micro else format_time(moment)


# Compiled descriptors of the client's type annotations: (tag, argument).
ANY, LIST, DICT, MODEL, TIME, MICROTIME, BOOL, NUMBER, INT, STRING = range(10)
Descriptor = tuple[int, Any]
# metav1.MicroTime fields (the models say datetime for both kinds of time): (model, JSON field).
MICROTIME_FIELDS = frozenset(
    {("V1LeaseSpec", "acquireTime"), ("V1LeaseSpec", "renewTime"), ("CoreV1Event", "eventTime"),
     ("CoreV1EventSeries", "lastObservedTime")}
)  # fmt: skip


def _describe(annotation: Any, micro: bool = False) -> Descriptor:
    """One annotation, with Optional[...] and Annotated[...] removed, as a descriptor."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return (ANY, None)  # IntOrString and the like: any scalar goes
            annotation = args[0]
        else:
            break
    if origin in (list, typing.List):  # noqa: UP006
        (item,) = typing.get_args(annotation) or (Any,)
        return (LIST, _describe(item))
    if origin in (dict, typing.Dict):  # noqa: UP006
        value_args = typing.get_args(annotation)
        return (DICT, _describe(value_args[1]) if len(value_args) == 2 else (ANY, None))
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return (MODEL, annotation)
    if annotation is datetime.datetime:
        return (MICROTIME if micro else TIME, None)
    simple = {bool: BOOL, int: INT, float: NUMBER, str: STRING}
    return (simple.get(annotation, ANY), None)


@functools.cache
def _fields(model: Any) -> dict[str, Descriptor]:
    result = {}
    for name, info in model.model_fields.items():
        key = info.serialization_alias or info.alias or name
        result[key] = _describe(info.annotation, (model.__name__, key) in MICROTIME_FIELDS)
    return result


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


def _walk(value: Any, desc: Descriptor, path: str, unknown: list[str]) -> Any:
    """Check one value against its descriptor; returns it, normalized (times, nulls dropped)."""
    tag, arg = desc
    if value is None or tag == ANY:
        return value
    if tag == MODEL:
        if not isinstance(value, dict):
            raise DecodeError(path, f"expected object, got {_type_name(value)}")
        known = _fields(arg)
        result = {}
        for key, item in value.items():
            child = known.get(key)
            if child is None:
                unknown.append(f"{path}.{key}" if path else str(key))
            elif type(item) is str and child[0] == STRING:  # the commonest leaf, as _walk returns it
                result[key] = item
            elif item is not None:  # Go drops null pointers (omitempty) when it re-encodes
                result[key] = _walk(item, child, f"{path}.{key}" if path else key, unknown)
        return result
    if tag == LIST:
        if not isinstance(value, list):
            raise DecodeError(path, f"expected array, got {_type_name(value)}")
        if arg[0] == STRING and all(type(item) is str for item in value):
            return value
        return [_walk(item, arg, f"{path}[{i}]", unknown) for i, item in enumerate(value)]
    if tag == DICT:
        if not isinstance(value, dict):
            raise DecodeError(path, f"expected object, got {_type_name(value)}")
        if arg[0] == STRING and all(type(item) is str for item in value.values()):
            return value
        return {k: _walk(v, arg, f"{path}[{k}]", unknown) for k, v in value.items()}
    if tag == STRING:
        # Quantities are typed str in the client but are numbers in many manifests: accept both.
        if type(value) is not str and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise DecodeError(path, f"expected string, got {_type_name(value)}")
    elif tag in (TIME, MICROTIME):
        if not isinstance(value, str):
            raise DecodeError(path, f"expected a time string, got {_type_name(value)}")
        normal = _normal_time(value, tag == MICROTIME)
        if normal is None:
            raise DecodeError(path, f"parsing time {value!r}: not RFC 3339")
        return normal
    elif tag == BOOL:
        if not isinstance(value, bool):
            raise DecodeError(path, f"expected bool, got {_type_name(value)}")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DecodeError(path, f"expected number, got {_type_name(value)}")
    elif tag == INT and isinstance(value, float) and not value.is_integer():
        raise DecodeError(path, f"expected integer, got {value}")
    return value


SPEC_MEMO_SIZE = 512
# Only JSON's own types make a key: a datetime or a str subclass (from a YAML body) is walked each time.
_PLAIN_JSON_ONLY = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)


class _SpecMemo:
    """Walked specs by their JSON: the objects of one template (a Deployment's pods, a benchmark's)
    send the same spec, which is then walked once, not once per object. A hit is the stored result
    decoded afresh (the caller may change it) with the same unknown-field paths; equal bytes are
    equal JSON values, which the walk maps to equal results. A spec the walk refuses is never kept,
    and one orjson cannot encode (an integer past 64 bits) is walked each time."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._walked: dict[tuple[Descriptor, bytes], tuple[bytes, tuple[str, ...]]] = {}

    def walk(self, value: dict[str, Any], desc: Descriptor, path: str, unknown: list[str]) -> Any:
        try:
            encoded_value = orjson.dumps(value, option=_PLAIN_JSON_ONLY)
        except TypeError:  # not plain JSON values (orjson.JSONEncodeError is a TypeError)
            return _walk(value, desc, path, unknown)
        if b"null" in encoded_value:  # orjson writes NaN and infinities (YAML's .nan, .inf) as null too
            return _walk(value, desc, path, unknown)
        key = (desc, encoded_value)
        hit = self._walked.get(key)
        if hit is not None:
            unknown.extend(hit[1])
            return orjson.loads(hit[0])
        found: list[str] = []
        result = _walk(value, desc, path, found)
        if len(self._walked) >= self.size:
            self._walked.pop(next(iter(self._walked)), None)  # the oldest
        self._walked[key] = (orjson.dumps(result), tuple(found))  # the input's values, times as text
        unknown.extend(found)
        return result


_specs = _SpecMemo(SPEC_MEMO_SIZE)


def decode(obj: Mapping[str, Any], model_name: str) -> tuple[dict[str, Any], list[str]]:
    """The object with unknown fields dropped and times normalized, and the unknown field paths.

    Raises DecodeError (path, problem) for a value of the wrong JSON type."""
    unknown: list[str] = []
    desc = (MODEL, getattr(kubernetes.client, model_name))
    if not isinstance(obj, dict) or type(obj.get("spec")) is not dict:
        return _walk(obj, desc, "", unknown), unknown
    # The MODEL step of _walk at the top, with the spec walked through the memo.
    known = _fields(desc[1])
    result = {}
    for key, item in obj.items():
        child = known.get(key)
        if child is None:
            unknown.append(str(key))
        elif type(item) is str and child[0] == STRING:
            result[key] = item
        elif item is not None:
            walk = _specs.walk if key == "spec" and type(item) is dict else _walk
            result[key] = walk(item, child, key, unknown)
    return result, unknown
