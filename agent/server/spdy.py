"""SPDY/3.1 frames: what kubectl's port-forward speaks inside its WebSocket tunnel, and what a CRI runtime's
streaming server speaks (the agent is its client there: streamproxy.py).

kubectl 1.31+ dials `SPDY/3.1+portforward.k8s.io` as a WebSocket subprotocol and runs a SPDY client over
the WebSocket's binary messages (client-go tools/portforward/tunneling_dialer.go). This module parses the
frames that client sends and builds the ones a server answers with; `portforward.py` holds the session.
As a client (`syn_stream`), it opens the streams of an exec or attach on a CRI streaming server.

    control frame: 1 | version 3 (15 bits) | type (16) | flags (8) | length (24) | payload
    data frame:    0 | stream id (31)                  | flags (8) | length (24) | data

Header blocks (SYN_STREAM, SYN_REPLY) are `count, (len name, name, len value, value)*` with 32-bit big-
endian lengths, compressed with zlib under the SPDY/3 dictionary, one compression stream per direction
for the whole connection, each block ending with a sync flush. Flow control (WINDOW_UPDATE) is read and
ignored, as the Go client (moby/spdystream) neither enforces nor needs it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
RST_PROTOCOL_ERROR, RST_REFUSED_STREAM, RST_CANCEL = 1, 3, 5
MAX_HEADER_BLOCK = 256 * 1024

# The SPDY/3 header compression dictionary (draft-mbelshe-httpbis-spdy-00 section 2.6.10.1): these words,
# each with a 32-bit length before it, then the tail as it stands. 1,423 bytes.
_WORD_TEXT = (  # "_" stands for the space in "200 OK"
    "options head post put delete trace accept accept-charset accept-encoding accept-language "
    "accept-ranges age allow authorization cache-control connection content-base content-encoding "
    "content-language content-length content-location content-md5 content-range content-type date etag "
    "expect expires from host if-match if-modified-since if-none-match if-range if-unmodified-since "
    "last-modified location max-forwards pragma proxy-authenticate proxy-authorization range referer "
    "retry-after server te trailer transfer-encoding upgrade user-agent vary via warning "
    "www-authenticate method get status 200_OK version HTTP/1.1 url public set-cookie keep-alive origin"
)
_WORDS = [word.replace("_", " ") for word in _WORD_TEXT.split()]
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()


class SpdyError(Exception):
    """The peer broke the protocol; the connection ends (GOAWAY)."""


@dataclass
class Frame:
    control: bool
    kind: int  # a control frame's type; 0 for data
    flags: int
    stream: int  # 0 for SETTINGS, PING, GOAWAY
    payload: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)  # SYN_STREAM's, names lower-case
    value: int = 0  # PING's id, RST_STREAM's and GOAWAY's status

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class Codec:
    """One connection's frame parser and builder (it holds both header compression streams)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        """The whole frames in what has arrived so far (the rest waits for more)."""
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack(">II", self._buffer[:8])
            length = second & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            flags = second >> 24
            if first & 0x80000000:
                frames.append(self._control((first >> 16) & 0x7FFF, first & 0xFFFF, flags, payload))
            else:
                frames.append(Frame(False, 0, flags, first & 0x7FFFFFFF, payload))
        return frames

    def _control(self, version: int, kind: int, flags: int, payload: bytes) -> Frame:
        if version != VERSION:
            raise SpdyError(f"SPDY version {version} is not served (only 3)")
        if kind == SYN_STREAM:
            if len(payload) < 10:
                raise SpdyError("SYN_STREAM shorter than its fixed fields")
            stream = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            return Frame(True, kind, flags, stream, headers=self._headers(payload[10:]))
        if kind in (SYN_REPLY, HEADERS):
            stream = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF if len(payload) >= 4 else 0
            return Frame(True, kind, flags, stream, headers=self._headers(payload[4:]))
        if kind in (RST_STREAM, GOAWAY, WINDOW_UPDATE):
            if len(payload) < 8:
                raise SpdyError(f"control frame {kind} shorter than its fixed fields")
            stream, value = struct.unpack(">II", payload[:8])
            return Frame(True, kind, flags, stream & 0x7FFFFFFF, value=value)
        if kind == PING:
            if len(payload) < 4:
                raise SpdyError("PING shorter than its id")
            return Frame(True, kind, flags, 0, value=struct.unpack(">I", payload[:4])[0])
        return Frame(True, kind, flags, 0, payload)  # SETTINGS and unknown types: nothing to do

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BLOCK)
        except zlib.error as exc:
            raise SpdyError(f"header block does not decompress: {exc}") from None
        if self._inflate.unconsumed_tail:
            raise SpdyError(f"header block larger than {MAX_HEADER_BLOCK} bytes")
        try:
            (count,) = struct.unpack(">I", raw[:4])
            offset, headers = 4, {}
            for _ in range(count):
                (size,) = struct.unpack(">I", raw[offset : offset + 4])
                name = raw[offset + 4 : offset + 4 + size].decode("latin-1").lower()
                offset += 4 + size
                (size,) = struct.unpack(">I", raw[offset : offset + 4])
                headers[name] = raw[offset + 4 : offset + 4 + size].decode("latin-1")
                offset += 4 + size
        except struct.error:
            raise SpdyError("header block is truncated") from None
        return headers

    # ----- building ------------------------------------------------------------------------------

    @staticmethod
    def _control_frame(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    def _header_block(self, headers: dict[str, str] | None) -> bytes:
        items = sorted((headers or {}).items())
        raw = struct.pack(">I", len(items))
        for name, value in items:
            raw += (
                struct.pack(">I", len(name))
                + name.lower().encode()
                + struct.pack(">I", len(value))
                + value.encode()
            )
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_reply(self, stream: int, headers: dict[str, str] | None = None) -> bytes:
        return self._control_frame(SYN_REPLY, 0, struct.pack(">I", stream) + self._header_block(headers))

    def syn_stream(self, stream: int, headers: dict[str, str], *, fin: bool = False) -> bytes:
        """The client's side: open `stream` (odd ids, rising) with its headers; priority 0, no association."""
        fixed = struct.pack(">IIH", stream, 0, 0)
        return self._control_frame(SYN_STREAM, FLAG_FIN if fin else 0, fixed + self._header_block(headers))

    def ping(self, ident: int) -> bytes:
        return self._control_frame(PING, 0, struct.pack(">I", ident))

    def rst_stream(self, stream: int, status: int) -> bytes:
        return self._control_frame(RST_STREAM, 0, struct.pack(">II", stream, status))

    def goaway(self, last_stream: int, status: int = 1) -> bytes:
        return self._control_frame(GOAWAY, 0, struct.pack(">II", last_stream, status))

    @staticmethod
    def data(stream: int, data: bytes, *, fin: bool = False) -> bytes:
        return struct.pack(">II", stream, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data
