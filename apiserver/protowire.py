"""Just enough of the protobuf wire format to read the protobuf bodies kubectl's typed clients send.

kubectl's typed clients (`create namespace`, `drain --disable-eviction`'s deletes, `auth can-i`) post
`application/vnd.kubernetes.protobuf` with no JSON fallback: the `k8s\\x00` envelope holds a runtime.Unknown
(typeMeta = 1 {apiVersion 1, kind 2}, raw = 2) whose `raw` is the object. See protobody.py for the kinds.
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
    return dict(entries(data))


def entries(data: bytes) -> list[tuple[int, bytes | int]]:
    """Every (field number, value) in order, repeated fields included."""
    out: list[tuple[int, bytes | int]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.append((number, data[pos : pos + length]))
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


def repeated(data: bytes, number: int) -> list[bytes]:
    return [v for n, v in entries(data) if n == number and isinstance(v, bytes)]


def varint(data: bytes, number: int) -> int | None:
    value = fields(data).get(number)
    return value if isinstance(value, int) else None


def unwrap(body: bytes) -> bytes:
    """The object bytes inside kube's protobuf envelope (runtime.Unknown field 2, `raw`)."""
    if not body.startswith(ENVELOPE_MAGIC):
        raise ValueError("not a kubernetes protobuf envelope")
    return message(body[len(ENVELOPE_MAGIC) :], 2)


def envelope_kind(body: bytes) -> tuple[str, str]:
    """(apiVersion, kind) from the envelope's typeMeta."""
    if not body.startswith(ENVELOPE_MAGIC):
        raise ValueError("not a kubernetes protobuf envelope")
    type_meta = message(body[len(ENVELOPE_MAGIC) :], 1)
    return string(type_meta, 1), string(type_meta, 2)
