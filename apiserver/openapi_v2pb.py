"""`/openapi/v2` as protobuf (gnostic's openapi.v2.Document), the only form client-go's discovery reads.

kubectl falls back to client-side validation against OpenAPI v2 where the v3 route does not apply: a
`kind: List` file in `kubectl create/apply -f` always takes it. Its models come from `definitions` alone
(kube-openapi's proto.NewOpenAPIData), so those are encoded in full; paths are left out. Field numbers are
those of gnostic's OpenAPIv2.proto (Document.definitions = 9, Schema._ref = 1, ... vendor_extension = 31).
"""

from __future__ import annotations

from typing import Any

import yaml

MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode()) if text else b""


def _named(name: str, value: bytes) -> bytes:
    """gnostic's Named* pair: name = 1, value = 2."""
    return _string(1, name) + _bytes(2, value)


def _schema(schema: dict[str, Any]) -> bytes:
    out = bytearray()
    out += _string(1, schema.get("$ref", ""))
    out += _string(2, schema.get("format", ""))
    out += _string(4, schema.get("description", ""))
    for name in schema.get("required", ()):
        out += _string(19, name)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        out += _bytes(21, _bytes(1, _schema(extra)))  # AdditionalPropertiesItem.schema
    if "type" in schema:
        out += _bytes(22, _string(1, schema["type"]))  # TypeItem.value
    if "items" in schema:
        out += _bytes(23, _bytes(1, _schema(schema["items"])))  # ItemsItem.schema
    for part in schema.get("allOf", ()):
        out += _bytes(24, _schema(part))
    if "properties" in schema:
        props = b"".join(_bytes(1, _named(k, _schema(v))) for k, v in schema["properties"].items())
        out += _bytes(25, props)  # Properties.additional_properties
    for key, value in schema.items():
        if key.startswith("x-"):
            # NamedAny{name, Any{yaml = 2}}: kube-openapi reads extensions back from their YAML text.
            out += _bytes(31, _named(key, _string(2, yaml.safe_dump(value))))
    return bytes(out)


def encode_document(document: dict[str, Any]) -> bytes:
    """The Swagger 2.0 document (v2_document) as openapi.v2.Document bytes: swagger, info, definitions."""
    info = document.get("info", {})
    out = _string(1, document.get("swagger", "2.0"))
    out += _bytes(2, _string(1, info.get("title", "")) + _string(2, info.get("version", "")))
    definitions = b"".join(
        _bytes(1, _named(k, _schema(v))) for k, v in document.get("definitions", {}).items()
    )
    return out + _bytes(9, definitions)
