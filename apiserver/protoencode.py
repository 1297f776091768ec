"""Objects written as `application/vnd.kubernetes.protobuf`, for the clients that ask for it first (Go
components: kube-scheduler and kube-controller-manager send `Accept: application/vnd.kubernetes.protobuf,
*/*`), with the tables of protoschema_data.py: the reverse of protoschema.py's decoding.

- `wants_protobuf(accept)`: the first media type of the Accept header this server can serve is protobuf
  (without `as=Table` or `as=PartialObjectMetadata`, which stay JSON);
- `encode_object(obj)`: kube's envelope (`k8s\\x00` + runtime.Unknown{typeMeta, raw}) around the object's
  message; None for a kind without a table (a CRD-like kind: kube serves those as JSON only);
- `watch_frame(event)`: one frame of a protobuf watch stream (`;stream=watch`): a 4-byte big-endian length,
  then metav1.WatchEvent{type, object: RawExtension{raw: the enveloped object}} without an envelope.
"""

from __future__ import annotations

import base64
import datetime
import re
import struct
from typing import Any

import orjson

from apiserver import protoschema
from apiserver.protobody import MEDIA_TYPE
from apiserver.protowire import ENVELOPE_MAGIC

WATCH_MEDIA_TYPE = MEDIA_TYPE + ";stream=watch"
_SERVABLE = ("application/json", "*/*", "application/*", MEDIA_TYPE)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600e9, "m": 60e9, "s": 1e9, "ms": 1e6, "us": 1e3, "µs": 1e3, "ns": 1.0}


def wants_protobuf(accept: str) -> bool:
    for media in accept.split(","):
        kind, *params = (part.strip() for part in media.split(";"))
        if kind not in _SERVABLE:
            continue
        if any(p.startswith("as=") for p in params):
            return False  # a Table or PartialObjectMetadata: the JSON handlers answer it
        return kind == MEDIA_TYPE
    return False


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int32/int64: ten bytes of two's complement, as Go writes them
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _delimited(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _varint(len(payload)) + payload


def _time(text: object) -> bytes:
    if not isinstance(text, str) or not text:
        return b""
    moment = datetime.datetime.fromisoformat(text.replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    seconds = int(moment.timestamp() // 1)
    nanos = moment.microsecond * 1000
    return _key(1, 0) + _varint(seconds) + (_key(2, 0) + _varint(nanos) if nanos else b"")


def _duration(text: object) -> bytes:
    nanos = 0.0
    if isinstance(text, str):
        sign = -1 if text.startswith("-") else 1
        nanos = sign * sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(text))
    return _key(1, 0) + _varint(int(nanos))


def _special(kind: str, value: Any) -> bytes | None:
    if kind in (protoschema._TIME, protoschema._MICROTIME):
        return _time(value)
    if kind == protoschema._QUANTITY:
        return _delimited(1, str(value).encode())
    if kind == protoschema._INTORSTRING:
        if isinstance(value, str):
            return _key(1, 0) + _varint(1) + _delimited(3, value.encode())
        return _key(1, 0) + _varint(0) + _key(2, 0) + _varint(int(value))
    if kind in (protoschema._RAW, protoschema._FIELDS):
        return _delimited(1, orjson.dumps(value))
    if kind == protoschema._DURATION:
        return _duration(value)
    return None


def _scalar(number: int, kind: str, value: Any) -> bytes:
    if kind == "string":
        return _delimited(number, str(value).encode())
    if kind == "bytes":
        return _delimited(number, base64.b64decode(value) if isinstance(value, str) else b"")
    if kind == "bool":
        return _key(number, 0) + _varint(1 if value else 0)
    if kind in ("int32", "int64"):
        return _key(number, 0) + _varint(int(value))
    raise ValueError(f"unsupported scalar type {kind}")


def _field(number: int, kind: str, value: Any) -> bytes:
    if kind in ("string", "bytes", "bool", "int32", "int64"):
        return _scalar(number, kind, value)
    return _delimited(number, encode_message(kind, value))


def encode_message(message: str, obj: Any) -> bytes:
    special = _special(message, obj)
    if special is not None:
        return special
    table = protoschema._table(message)
    if table is None:
        raise ValueError(f"no protobuf schema for {message}")
    if protoschema._is_list(message):
        kind = table[1][1]
        return b"".join(_scalar(1, kind, item) for item in obj or ())
    if not isinstance(obj, dict):
        return b""
    out = bytearray()
    for number in sorted(table):
        name, kind, flags = table[number]
        if "i" in flags:  # an inline struct: its fields are the parent's
            out += _delimited(number, encode_message(kind, obj))
            continue
        value = obj.get(name)
        if value is None:
            continue
        if kind.startswith("map:"):
            _, key_kind, value_kind = kind.split(":", 2)
            for key, item in value.items():
                if item is None:
                    continue
                entry = _scalar(1, key_kind, key) + _field(2, value_kind, item)
                out += _delimited(number, entry)
        elif "r" in flags:
            for item in value:
                out += _field(number, kind, item)
        else:
            out += _field(number, kind, value)
    return bytes(out)


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _delimited(1, api_version.encode()) + _delimited(2, kind.encode())
    return ENVELOPE_MAGIC + _delimited(1, type_meta) + _delimited(2, raw)


def encode_object(obj: Any) -> bytes | None:
    """The enveloped protobuf of an object (or a list, whose kind ends in List); None without a table."""
    if not isinstance(obj, dict):
        return None
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    if kind == "Status":
        message: str | None = protoschema.META + "Status"
    else:
        message = protoschema.message_for(api_version, kind)
    if message is None:
        return None
    if kind.endswith("List") and kind != "List":
        item_message = protoschema.message_for(api_version, kind[: -len("List")])
        if item_message is None:
            return None
    return _envelope(api_version, kind, encode_message(message, obj))


def watch_frame(event_type: str, obj: Any) -> bytes | None:
    encoded = encode_object(obj)
    if encoded is None:
        return None
    event = _delimited(1, event_type.encode()) + _delimited(2, _delimited(1, encoded))
    return struct.pack(">I", len(event)) + event
