"""Just enough of the protobuf wire format to read the one protobuf body kubectl sends here.

kubectl's typed authorization client posts SelfSubjectAccessReview as `application/vnd.kubernetes.protobuf`
(no JSON fallback), so `auth can-i` needs it read: the `k8s\\x00` envelope holds a runtime.Unknown whose `raw`
field is the object. Fields are returned by number; strings are decoded as UTF-8.
"""

from __future__ import annotations

ENVELOPE_MAGIC = b"k8s\x00"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> dict[int, bytes | int]:
    """Field number -> last value (bytes for length-delimited, int for varint); other wire types skipped."""
    out: dict[int, bytes | int] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            out[number], pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            out[number] = data[pos : pos + length]
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def message(data: bytes, number: int) -> bytes:
    value = fields(data).get(number, b"")
    return value if isinstance(value, bytes) else b""


def string(data: bytes, number: int) -> str:
    return message(data, number).decode()


def unwrap(body: bytes) -> bytes:
    """The object bytes inside kube's protobuf envelope (runtime.Unknown field 2, `raw`)."""
    if not body.startswith(ENVELOPE_MAGIC):
        raise ValueError("not a kubernetes protobuf envelope")
    return message(body[len(ENVELOPE_MAGIC) :], 2)
