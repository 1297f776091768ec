"""Protobuf request bodies (kubectl's typed clients): the envelope read into the JSON the handlers take."""

from __future__ import annotations

from apiserver.auth.reviews import attributes_to_info
from apiserver.protobody import decode
from apiserver.protowire import ENVELOPE_MAGIC, fields


def field(number: int, value: bytes) -> bytes:
    assert len(value) < 128
    return bytes([number << 3 | 2, len(value)]) + value


def test_protobuf_access_review_is_read() -> None:
    attributes = field(1, b"default") + field(2, b"update") + field(5, b"pods") + field(6, b"status")
    review = field(1, b"") + field(2, field(1, attributes))
    type_meta = field(1, b"authorization.k8s.io/v1") + field(2, b"SelfSubjectAccessReview")
    body = (
        ENVELOPE_MAGIC
        + field(1, type_meta)
        + field(2, review)
        + field(4, b"application/vnd.kubernetes.protobuf")
    )
    decoded = decode(body)
    assert decoded is not None
    spec = decoded["spec"]
    assert spec == {
        "resourceAttributes": {
            "namespace": "default",
            "verb": "update",
            "resource": "pods",
            "subresource": "status",
        }
    }
    info = attributes_to_info(spec)
    assert (info.verb, info.namespace, info.resource, info.subresource, info.is_resource_request) == (
        "update", "default", "pods", "status", True,
    )  # fmt: skip
    other = attributes_to_info({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}})
    assert (other.path, other.verb, other.is_resource_request) == ("/metrics", "get", False)


def test_varints_and_fixed_fields_are_skipped_or_read() -> None:
    data = bytes([1 << 3 | 0, 0xAC, 0x02]) + bytes([2 << 3 | 5, 1, 2, 3, 4]) + field(3, b"x")
    assert fields(data) == {1: 300, 3: b"x"}


def test_protobuf_binding_and_delete_options_are_read() -> None:
    meta = field(1, b"p") + field(3, b"default")
    target = field(1, b"Node") + field(3, b"n1")
    type_meta = field(1, b"v1") + field(2, b"Binding")
    body = ENVELOPE_MAGIC + field(1, type_meta) + field(2, field(1, meta) + field(2, target))
    assert decode(body) == {
        "kind": "Binding", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default"},
        "target": {"kind": "Node", "name": "n1"},
    }  # fmt: skip
    grace = bytes([1 << 3 | 0]) + bytes([0xFF] * 9 + [0x01])  # int64 -1, as Go encodes it
    options = ENVELOPE_MAGIC + field(1, field(1, b"v1") + field(2, b"DeleteOptions")) + field(2, grace)
    assert decode(options) == {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": -1}
    unknown = ENVELOPE_MAGIC + field(1, field(1, b"v1") + field(2, b"Frobnicator")) + field(2, b"")
    assert decode(unknown) is None
