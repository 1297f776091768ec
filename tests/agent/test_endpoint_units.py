"""The authenticated endpoint's pieces without processes: SPDY framing and the authorization mapping."""

from __future__ import annotations

import hashlib
import struct
import zlib

import pytest

from agent.server.auth import Attributes, Authorizer, Identity, attributes, identity_of
from agent.server.spdy import DICTIONARY, FLAG_FIN, PING, SYN_REPLY, SYN_STREAM, Codec, SpdyError


def test_the_header_dictionary_is_spdy3s() -> None:
    # The SPDY/3 draft's dictionary (as Go's and moby/spdystream's framers hold it): 1,423 bytes.
    assert len(DICTIONARY) == 1423
    assert hashlib.sha256(DICTIONARY).hexdigest() == (
        "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"
    )


def _header_block(compressor: zlib._Compress, headers: dict[str, str]) -> bytes:
    raw = struct.pack(">I", len(headers))
    for name, value in headers.items():
        raw += struct.pack(">I", len(name)) + name.encode() + struct.pack(">I", len(value)) + value.encode()
    return compressor.compress(raw) + compressor.flush(zlib.Z_SYNC_FLUSH)


def _control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8003, kind, (flags << 24) | len(payload)) + payload


def test_frames_parse_across_message_boundaries_and_replies_decompress() -> None:
    client = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zdict=DICTIONARY)
    codec = Codec()
    frames = b""
    for stream, kind in ((1, "error"), (3, "data")):
        block = _header_block(client, {"streamtype": kind, "port": "8080", "requestid": "0"})
        frames += _control(SYN_STREAM, 0, struct.pack(">IIH", stream, 0, 0) + block)
    frames += struct.pack(">II", 3, (FLAG_FIN << 24) | 5) + b"hello"
    frames += _control(PING, 0, struct.pack(">I", 7))
    parsed = [f for i in range(0, len(frames), 5) for f in codec.feed(frames[i : i + 5])]  # 5-byte pieces
    assert [(f.kind, f.stream) for f in parsed] == [(SYN_STREAM, 1), (SYN_STREAM, 3), (0, 3), (PING, 0)]
    assert parsed[1].headers == {"streamtype": "data", "port": "8080", "requestid": "0"}
    assert parsed[2].payload == b"hello" and parsed[2].fin
    assert parsed[3].value == 7
    # The replies share one compression stream, as the client's reader expects.
    reader = zlib.decompressobj(zdict=DICTIONARY)
    for stream in (1, 3):
        reply = codec.syn_reply(stream)
        assert struct.unpack(">HH", reply[:4]) == (0x8003, SYN_REPLY)
        assert struct.unpack(">I", reply[8:12])[0] == stream
        assert reader.decompress(reply[12:]) == struct.pack(">I", 0)


def test_a_frame_of_another_version_is_a_protocol_error() -> None:
    with pytest.raises(SpdyError, match="version 2"):
        Codec().feed(struct.pack(">HHI", 0x8002, SYN_STREAM, 0))


def test_requests_map_to_node_subresources_as_the_kubelets() -> None:
    assert attributes("GET", "/containerLogs/ns/p/c") == Attributes("get", "proxy")
    assert attributes("GET", "/exec/ns/p/c") == Attributes(
        "create", "proxy"
    )  # a WebSocket GET runs a command
    assert attributes("POST", "/portForward/ns/p") == Attributes("create", "proxy")
    assert attributes("GET", "/stats/summary") == Attributes("get", "stats")
    assert attributes("GET", "/metrics") == Attributes("get", "metrics")
    assert attributes("GET", "/pods") == Attributes("get", "pods")
    subject = ((("organizationName", "system:nodes"),), (("commonName", "system:node:n1"),))
    assert identity_of({"subject": subject}) == Identity("system:node:n1", ("system:nodes",))
    assert identity_of({}) is None and identity_of(None) is None


def test_reviews_are_cached_as_the_kubelet_caches_them() -> None:
    now = [0.0]
    asked: list[str] = []

    def review(who: Identity, what: Attributes) -> tuple[bool, str]:
        asked.append(who.user)
        return who.user == "apiserver", "" if who.user == "apiserver" else "no RBAC rule"

    authorizer = Authorizer(review, clock=lambda: now[0])
    server, node = Identity("apiserver", ()), Identity("system:node:x", ("system:nodes",))
    what = Attributes("create", "proxy")
    assert authorizer.decide(server, what) == (True, "")
    assert authorizer.decide(node, what) == (False, "no RBAC rule")
    now[0] = 29.0
    authorizer.decide(server, what), authorizer.decide(node, what)
    assert asked == ["apiserver", "system:node:x"]  # both cached
    now[0] = 31.0  # a denial is kept 30 s, an allowance 5 minutes
    authorizer.decide(server, what), authorizer.decide(node, what)
    assert asked == ["apiserver", "system:node:x", "system:node:x"]


def test_stream_flags_take_kube_apiservers_names_and_kubectls() -> None:
    """kube-apiserver sends the kubelet input/output/error/tty=1 (pod strategy's streamParams); kubenode
    apiserver passes on kubectl's stdin/stdout/stderr=true. Both turn a stream on; none named is off."""
    from agent.container.streaming import StreamFlags
    from agent.server.channels import stream_flags

    assert stream_flags({"input": "1", "output": "1", "error": "1"}) == StreamFlags(True, True, True, False)
    assert stream_flags({"output": "1", "tty": "1"}) == StreamFlags(False, True, False, True)
    assert stream_flags({"stdin": "true", "stdout": "true"}) == StreamFlags(True, True, False, False)
    assert stream_flags({}) == StreamFlags(False, False, False, False)
