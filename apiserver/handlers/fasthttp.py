"""The server's HTTP/1.1 connections: unary REST verbs answered here, everything else handed to aiohttp.

Why: aiohttp's per-request machinery (its parser's message objects, the router, the middleware
wrapper, a StreamResponse written in three steps) cost about a quarter of the server's CPU on the
hot verbs (a pod's create, its binding, its Scheduled event), more than the handlers themselves.

Flow of a connection (`Connection`, one per accepted TLS connection):
1. bytes are buffered until a whole request head (`\\r\\n\\r\\n`) and its Content-Length body are in;
2. a plain request (HTTP/1.1, origin-form path without escapes, Content-Length or no body, no
   Transfer-Encoding/Content-Encoding/Upgrade/Expect, within aiohttp's size limits) that is a
   unary resource verb (get, list, create, update, patch, delete, deletecollection, binding,
   status, eviction; not a watch, a log or a connect stream, nor a group with routes of its own)
   runs through the same
   `api_middleware` and `dispatch` as under aiohttp, with a `FastRequest` standing in for
   aiohttp's request, and its `web.Response` is written as one block;
3. requests are answered one at a time in order (pipelined ones wait in the buffer), so replies
   keep the order of the requests, as HTTP/1.1 requires;
4. the first request that is anything else (a watch, discovery, /healthz, a chunked body, a
   malformed or oversized head) hands the connection to an aiohttp `RequestHandler` for good,
   once every earlier answer is written: it gets the transport and the unread bytes from that
   request's first byte on, so aiohttp parses, answers or refuses it (with the Status of
   handlers/httperrors.py) exactly as before.
A write is still answered only after its commit: the handlers are the same; only the HTTP around
them is lighter. Idle connections close after aiohttp's keep-alive timeout, as before.
"""

from __future__ import annotations

import asyncio
import email.utils
import http
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast
from urllib.parse import parse_qsl

from aiohttp import web
from aiohttp.tcp_helpers import tcp_keepalive, tcp_nodelay
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from apiserver.handlers.common import MAX_BODY
from apiserver.handlers.httperrors import MAX_FIELD, MAX_HEADERS
from apiserver.request import CONNECT_SUBRESOURCES, RequestInfo, request_info

log = logging.getLogger(__name__)

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
STREAM_SUBRESOURCES = frozenset({"log", "proxy", *CONNECT_SUBRESOURCES})
MAX_HEAD = MAX_FIELD  # a longer head (or a partial one this long) goes to aiohttp, which applies its limits
KEEPALIVE_TIMEOUT = 3630.0  # aiohttp's default for an idle kept-alive connection
# kube-apiserver's ReadHeaderTimeout: a request head must be whole this long after the connection is made
# (the first request) or after its first bytes came (a later one); otherwise the connection is closed.
HEADER_TIMEOUT = 32.0
PAUSE_BUFFER = 4 * MAX_BODY  # pipelined bytes buffered before the connection stops reading
READ_BUFFER = 16 * 1024  # a connection's read buffer to start with (kept small: a fleet holds hundreds)
MIN_FREE = 8 * 1024  # room offered to each read; a bigger request grows the buffer
_OCTET_STREAM = "application/octet-stream"  # aiohttp's content_type when none is sent


class FastBody:
    """The body, all received: what read_json asks of aiohttp's StreamReader."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def at_eof(self) -> bool:
        return not self._data

    def read_nowait(self, n: int = -1) -> bytes:
        data = self._data if n < 0 else self._data[:n]
        self._data = self._data[len(data) :]
        return data

    async def read(self, n: int = -1) -> bytes:
        return self.read_nowait(n)


class FastRequest(dict[str, Any]):
    """The part of aiohttp's web.Request that the middleware and the unary handlers read."""

    __slots__ = ("app", "content", "content_length", "content_type", "headers", "method", "path", "query")

    def __init__(
        self,
        app: web.Application,
        method: str,
        path: str,
        query: MultiDictProxy[str],
        headers: CIMultiDictProxy[str],
        body: bytes,
        content_length: int | None,
        info: RequestInfo,
    ) -> None:
        super().__init__(info=info)
        self.app = app
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.content = FastBody(body)
        self.content_length = content_length
        raw_type = headers.get("Content-Type")
        self.content_type = raw_type.split(";", 1)[0].strip().lower() if raw_type else _OCTET_STREAM


class Head:
    """A parsed request head that the fast path can take."""

    __slots__ = ("close", "headers", "info", "length", "method", "path", "query")

    def __init__(
        self,
        method: str,
        path: str,
        query: MultiDictProxy[str],
        headers: CIMultiDictProxy[str],
        length: int | None,
        close: bool,
        info: RequestInfo,
    ) -> None:
        self.method, self.path, self.query, self.headers = method, path, query, headers
        self.length, self.close, self.info = length, close, info


# Whole lines only (the head gets a final CRLF added): a token name, a colon, and visible characters,
# spaces and tabs; no bare CR or LF, no NUL, no folding. One match checks every line; another takes
# them apart with the optional whitespace around each value left out.
_REQUEST_LINE = re.compile(r"([A-Z]+) (/[!-~]*) HTTP/1\.1")
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_FIELD_LINES = re.compile(rf"(?:{_TOKEN}:[\t\x20-\x7e\x80-\xff]*\r\n)*")
_WORD = r"[\x21-\x7e\x80-\xff]+"  # values: words between spaces and tabs (greedy: no backtracking)
_FIELD = re.compile(rf"({_TOKEN}):[ \t]*((?:{_WORD}(?:[ \t]+{_WORD})*)?)[ \t]*\r\n")


def parse_head(head: bytes, slow_groups: frozenset[str]) -> Head | None:
    """The head (without its final CRLF CRLF) as a fast request, or None for aiohttp to take it."""
    if len(head) > MAX_HEAD:
        return None
    text = head.decode("latin-1") + "\r\n"
    split = text.find("\r\n")
    request_line = _REQUEST_LINE.fullmatch(text, 0, split)
    if request_line is None:
        return None
    method, target = request_line.groups()
    block = text[split + 2 :]
    if method not in METHODS or _FIELD_LINES.fullmatch(block) is None or block.count("\n") > MAX_HEADERS:
        return None
    path, _, query_text = target.partition("?")
    if "%" in path or "//" in path or "/." in path or "#" in target or ";" in query_text:
        return None
    headers = CIMultiDict(_FIELD.findall(block))
    if (
        "Transfer-Encoding" in headers
        or "Content-Encoding" in headers
        or "Upgrade" in headers
        or "Expect" in headers
    ):
        return None  # bodies aiohttp transforms (chunked, compressed), upgrades and 100-continue
    length: int | None = None
    if "Content-Length" in headers:
        lengths = headers.getall("Content-Length")
        if len(lengths) > 1 or not lengths[0].isascii() or not lengths[0].isdigit():
            return None
        length = int(lengths[0])
        if length > MAX_BODY:
            return None  # aiohttp's path answers the 413
    close = False
    if "Connection" in headers:
        tokens = {t.strip().lower() for t in ",".join(headers.getall("Connection")).split(",")}
        if "upgrade" in tokens:
            return None
        close = "close" in tokens
    query = _NO_QUERY
    if query_text:
        query = MultiDictProxy(MultiDict(_query_pairs(query_text)))
    info = request_info(method, path, query)
    if (
        not info.is_resource_request
        or info.verb == "watch"
        or info.subresource in STREAM_SUBRESOURCES
        or info.api_group in slow_groups
    ):
        return None
    return Head(method, path, query, CIMultiDictProxy(headers), length, close, info)


def _query_pairs(text: str) -> list[tuple[str, str]]:
    """parse_qsl(text, keep_blank_values=True), split directly when nothing needs unquoting (~5x faster)."""
    if "%" in text or "+" in text:
        return parse_qsl(text, keep_blank_values=True)
    return [(name, value) for name, _, value in (field.partition("=") for field in text.split("&") if field)]


_NO_QUERY: MultiDictProxy[str] = MultiDictProxy(MultiDict())
_STATUS_LINES = {
    int(status): f"HTTP/1.1 {int(status)} {status.phrase}\r\n".encode() for status in http.HTTPStatus
}


class _Date:
    """The Date header, formatted once a second."""

    def __init__(self) -> None:
        self.second = -1
        self.line = ""

    def header(self) -> str:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.line = f"Date: {email.utils.formatdate(now, usegmt=True)}\r\n"
        return self.line


_date = _Date()


def encode_response(response: web.StreamResponse, close: bool) -> bytes:
    """A handler's web.Response as HTTP/1.1 bytes (status line, headers, Content-Length, body)."""
    body = response.body if isinstance(response, web.Response) else None
    if not isinstance(body, bytes) or response.chunked:
        log.error("a unary handler answered %r; sent as a 500", type(response).__name__)
        body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}'
        return (
            _STATUS_LINES[500]
            + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body
        )
    status = _STATUS_LINES.get(response.status)
    if status is None:
        status = f"HTTP/1.1 {response.status} {response.reason}\r\n".encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in response.headers.items())
    if head.count("\n") != len(response.headers) or head.count("\r") != len(response.headers):
        # A CR or LF inside a value (a Warning quoting a client's field name) would split the header:
        # each becomes a space, as Go's net/http writes such a value for kube-apiserver.
        head = "".join(
            f"{name}: {value.replace(chr(13), ' ').replace(chr(10), ' ')}\r\n"
            for name, value in response.headers.items()
        )
    head += f"Content-Length: {len(body)}\r\n" + _date.header()
    if close:
        head += "Connection: close\r\n"
    return status + head.encode() + b"\r\n" + body  # UTF-8, as aiohttp encodes headers


Handle = Callable[[FastRequest], Awaitable[web.StreamResponse]]


class FastServer:
    """What every connection shares: the app, the handler chain, aiohttp's server for hand-overs."""

    def __init__(self, app: web.Application, aiohttp_server: web.Server, handle: Handle) -> None:
        self.app = app
        self.aiohttp_server = aiohttp_server
        self.handle = handle
        self.slow_groups = own_route_groups(app)
        self.connections: set[Connection] = set()
        self._sweeper: asyncio.TimerHandle | None = None

    def __call__(self) -> Connection:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(60.0, self._sweep)
        return Connection(self)

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        cutoff = time.monotonic() - KEEPALIVE_TIMEOUT
        for connection in list(self.connections):
            connection.close_if_idle(cutoff)
        self._sweeper = loop.call_later(60.0, self._sweep)

    def close(self) -> None:
        """Stop: idle connections close now, busy ones after their answer."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        for connection in list(self.connections):
            connection.stop()


def own_route_groups(app: web.Application) -> frozenset[str]:
    """API groups some module routes itself (reviews, CSRs, metrics.k8s.io): those stay with aiohttp's router.
    A core-group path routed elsewhere would make the core group slow too (none is)."""
    groups = set()
    for resource in app.router.resources():
        parts = [p for p in resource.canonical.strip("/").split("/") if p]
        generic = parts[:1] == ["apis"] and len(parts) > 1 and parts[1].startswith("{")
        if parts[:1] == ["apis"] and len(parts) >= 4 and not generic:
            groups.add(parts[1])
        elif parts[:1] == ["api"] and len(parts) >= 3 and not parts[2].startswith("{"):
            groups.add("")
    return frozenset(groups)


class Connection(asyncio.BufferedProtocol):
    """One client connection. Buffered: the TLS layer decrypts straight into `buffer` (with a plain
    Protocol uvloop allocates a 256 KiB bytes object per read; a ping-pong of 600-byte requests cost
    the server 35 us each that way, 16-20 us this way). Unread bytes are buffer[start:end]; the
    buffer is replaced (never resized) when it needs room, since the transport may hold a view of it."""

    def __init__(self, server: FastServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray(READ_BUFFER)
        self.start = 0
        self.end = 0
        self.busy = False  # a request is being answered
        self.eof = False
        self.closing = False
        self.write_paused = False
        self.read_paused = False
        self.handed: asyncio.Protocol | None = None  # aiohttp's RequestHandler, once handed over
        self.answering: asyncio.Task[None] | None = None  # the request in flight (a reference keeps it)
        self.loop = asyncio.get_running_loop()  # made by the loop's accept
        self.last_active = 0.0
        self.head_timer: asyncio.TimerHandle | None = None  # running while a request head is awaited
        self.answered = False  # a request was answered: from then on, idle waits have no head timeout

    # -- asyncio.BufferedProtocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's SSL transport is not a subclass
        self.transport = transport
        tcp_nodelay(transport, True)
        tcp_keepalive(transport)
        self.server.connections.add(self)
        self.last_active = time.monotonic()
        self._await_head()  # the first request's head is due within HEADER_TIMEOUT

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buffer) - self.end < MIN_FREE:
            unread = self.end - self.start
            fresh = bytearray(max(READ_BUFFER, 2 * (unread + MIN_FREE)))
            fresh[:unread] = self.buffer[self.start : self.end]
            self.buffer, self.start, self.end = fresh, 0, unread
        return memoryview(self.buffer)[self.end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.end += nbytes
        if self.handed is not None:
            data = bytes(self.buffer[self.start : self.end])
            self.start = self.end = 0
            self.handed.data_received(data)
            return
        if not self.busy:
            self._next()
        elif self.end - self.start > PAUSE_BUFFER and not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        if self.handed is not None:
            return self.handed.eof_received()
        self.eof = True
        if not self.busy:
            self._next()  # answers or hands over what is whole; closes when nothing is left
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        self.server.connections.discard(self)
        if self.handed is not None:
            self.handed.connection_lost(exc)
        self.transport = None

    def pause_writing(self) -> None:
        if self.handed is not None:
            self.handed.pause_writing()
        self.write_paused = True

    def resume_writing(self) -> None:
        if self.handed is not None:
            self.handed.resume_writing()
            return
        self.write_paused = False
        if not self.busy:
            self._next()

    # -- requests -------------------------------------------------------------------------------------------

    def close_if_idle(self, cutoff: float) -> None:
        if self.handed is None and not self.busy and self.last_active <= cutoff:
            self._close()

    def stop(self) -> None:
        """Server shutdown: close now, or after the answer in flight."""
        if self.busy:
            self.closing = True  # _answer writes the answer, then closes
        else:
            self._close()

    def _close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def _await_head(self) -> None:
        if self.head_timer is None:
            self.head_timer = self.loop.call_later(HEADER_TIMEOUT, self._head_timed_out)

    def _head_arrived(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if self.handed is None and not self.busy:
            self._close()

    def _next(self) -> None:
        """Start answering the next whole request in the buffer, if there is one and nothing is in flight."""
        if self.closing or self.write_paused or self.transport is None:
            return
        buffer, start, end = self.buffer, self.start, self.end
        if start == end:
            self.start = self.end = 0
            if self.eof:
                self._close()
            elif self.answered:  # idle between requests: kept alive, no head is due yet
                self._head_arrived()
            return
        head_end = buffer.find(b"\r\n\r\n", start, end)
        if head_end < 0:
            if end - start > MAX_HEAD or self.eof:
                self._hand_over()
            else:
                self._await_head()
            return
        self._head_arrived()
        head = parse_head(bytes(buffer[start:head_end]), self.server.slow_groups)
        if head is None:
            self._hand_over()
            return
        body_start = head_end + 4
        stop = body_start + (head.length or 0)
        if end < stop:
            if self.eof:
                self._hand_over()
            return
        body = bytes(buffer[body_start:stop])
        self.start = stop
        request = FastRequest(
            self.server.app, head.method, head.path, head.query, head.headers, body, head.length, head.info
        )
        self.busy = True
        self.answering = self.loop.create_task(self._answer(request, head.close))

    async def _answer(self, request: FastRequest, close: bool) -> None:
        try:
            response = await self.server.handle(request)
            close = close or response.keep_alive is False
            data = encode_response(response, close)
        except Exception:
            log.exception("answering %s %s failed", request.method, request.path)
            self._close()  # no answer can follow: the client sees the connection end
            return
        except BaseException:  # cancelled: the server is stopping
            self._close()
            raise
        finally:
            self.busy = False
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(data)
        self.last_active = time.monotonic()
        self.answered = True
        if close or self.closing:
            self._close()
            return
        if self.read_paused and self.end - self.start <= PAUSE_BUFFER:
            self.read_paused = False
            transport.resume_reading()
        self._next()

    def _hand_over(self) -> None:
        """From this request on, aiohttp serves the connection (every earlier answer is written)."""
        transport = self.transport
        assert transport is not None and not self.busy
        handler = self.server.aiohttp_server()
        self.handed = handler
        self._head_arrived()
        self.server.connections.discard(self)
        if self.read_paused:
            self.read_paused = False
            transport.resume_reading()
        handler.connection_made(transport)
        if self.write_paused:
            handler.pause_writing()
        data = bytes(self.buffer[self.start : self.end])
        self.start = self.end = 0
        if data:
            handler.data_received(data)
        if self.eof:
            handler.eof_received()
