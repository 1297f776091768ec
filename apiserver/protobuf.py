"""Request bodies in Kubernetes' protobuf encoding, for the few kinds kubectl sends that way.

kubectl's typed clients (`kubectl create namespace`, the evictions of `kubectl drain`) send
`application/vnd.kubernetes.protobuf`: the magic `k8s\\0`, then a `runtime.Unknown` holding
TypeMeta and the object's bytes. This decodes those kinds (Namespace, Eviction, DeleteOptions,
Binding) into the JSON shape the rest of the server reads, field numbers from k8s.io/api's
generated.proto; any other kind is a 415 naming it. Responses are always JSON, which those
clients accept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.status import APIError

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

Fields = dict[int, list[Any]]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def parse(data: bytes) -> Fields:
    """Field number -> values (ints for varints and fixed, bytes for length-delimited)."""
    fields: Fields = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _text(fields: Fields, number: int) -> str | None:
    values = fields.get(number)
    return values[-1].decode() if values else None


def _int(fields: Fields, number: int) -> int | None:
    values = fields.get(number)
    if not values:
        return None
    value = int(values[-1])
    return value - (1 << 64) if value >= 1 << 63 else value  # int64 two's complement


def _strings(fields: Fields, number: int) -> list[str]:
    return [v.decode() for v in fields.get(number, [])]


def _map(fields: Fields, number: int) -> dict[str, str]:
    result = {}
    for entry in fields.get(number, []):
        item = parse(entry)
        result[_text(item, 1) or ""] = _text(item, 2) or ""
    return result


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value not in (None, "", [], {}):
        target[key] = value


def object_meta(data: bytes) -> dict[str, Any]:
    fields = parse(data)
    meta: dict[str, Any] = {}
    for key, number in (
        ("name", 1),
        ("generateName", 2),
        ("namespace", 3),
        ("uid", 5),
        ("resourceVersion", 6),
    ):
        _put(meta, key, _text(fields, number))
    _put(meta, "labels", _map(fields, 11))
    _put(meta, "annotations", _map(fields, 12))
    _put(meta, "finalizers", _strings(fields, 14))
    return meta


def delete_options(data: bytes) -> dict[str, Any]:
    fields = parse(data)
    options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    _put(options, "gracePeriodSeconds", _int(fields, 1))
    if fields.get(2):
        pre = parse(fields[2][-1])
        preconditions: dict[str, Any] = {}
        _put(preconditions, "uid", _text(pre, 1))
        _put(preconditions, "resourceVersion", _text(pre, 2))
        _put(options, "preconditions", preconditions)
    _put(options, "propagationPolicy", _text(fields, 4))
    _put(options, "dryRun", _strings(fields, 5))
    return options


def _namespace(fields: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": object_meta(fields[1][-1]) if fields.get(1) else {}}
    if fields.get(2):
        _put(obj, "spec", {"finalizers": _strings(parse(fields[2][-1]), 1)})
    return obj


def _eviction(fields: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": object_meta(fields[1][-1]) if fields.get(1) else {}}
    if fields.get(2):
        obj["deleteOptions"] = delete_options(fields[2][-1])
    return obj


def _binding(fields: Fields) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": object_meta(fields[1][-1]) if fields.get(1) else {}}
    if fields.get(2):
        ref = parse(fields[2][-1])
        target: dict[str, Any] = {}
        for key, number in (("kind", 1), ("namespace", 2), ("name", 3), ("uid", 4), ("apiVersion", 5)):
            _put(target, key, _text(ref, number))
        obj["target"] = target
    return obj


DECODERS: dict[str, Callable[[Fields], dict[str, Any]]] = {
    "Namespace": _namespace,
    "Eviction": _eviction,
    "Binding": _binding,
}


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object (400 when unreadable, 415 for kinds not decoded)."""
    if not body.startswith(MAGIC):
        raise APIError(400, "BadRequest", "protobuf body without the k8s\\0 prefix")
    try:
        unknown = parse(body[len(MAGIC) :])
        type_meta = parse(unknown[1][-1]) if unknown.get(1) else {}
        api_version, kind = _text(type_meta, 1) or "", _text(type_meta, 2) or ""
        raw = unknown.get(2, [b""])[-1]
        if kind == "DeleteOptions":
            obj = delete_options(raw)
        elif kind in DECODERS:
            obj = DECODERS[kind](parse(raw))
        else:
            raise APIError(
                415,
                "UnsupportedMediaType",
                f"{PROTOBUF} is decoded only for Namespace, Eviction, Binding and DeleteOptions, "
                f"not {kind or 'this object'}: send application/json",
            )
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise APIError(400, "BadRequest", f"unreadable protobuf body: {exc}") from None
    obj["kind"] = kind
    obj["apiVersion"] = api_version
    return obj
