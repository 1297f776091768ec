"""The agent's local HTTP endpoint: `/healthz`, `/pods` (the pods and their status, as JSON), extra routes.

The server is an asyncio loop on one background thread, so an idle connection costs a socket, not a
thread. Every connection is bounded: at most `max_connections` are open at once (beyond that the
oldest connection still waiting for its request is closed, so idle sockets cannot lock a liveness
probe out; if none is idle the newcomer is answered 503), the request head must arrive within
`header_timeout` seconds and fit in `MAX_HEAD_BYTES`, and each connection serves one request
(`Connection: close`). Handlers that call
into the agent (which takes its lock) run on a small executor so a slow one never stalls the loop;
`/healthz` runs on the loop itself so it answers even when the agent is wedged.

Stream routes (`stream_routes`, by path prefix) get the request's path, query and headers and may answer
with an async iterator of chunks, streamed until it ends: `/containerLogs/...` (agent/server/containerlogs.py)
follows a log this way.

`/pods` pages like the API server's list: `?limit=N` (default and maximum `MAX_PAGE_ITEMS`) and
`?continue=TOKEN` from the previous page's `metadata.continue`; a page also stops once its body
reaches `MAX_PAGE_BYTES`, so one request never builds an unbounded body.

`/healthz` is 200 `ok` while `health()` reports no problem, else 500 with one `[-]` line per problem
(the kube-apiserver's verbose format), so systemd's watchdog and a liveness probe act on a dead loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Route = Callable[[], tuple[int, str, bytes]]


@dataclass(frozen=True)
class StreamRequest:
    """What a stream route is given: the path, the query, the headers (lower-case names), and
    `disconnected()`, true once the client has gone (a followed stream stops then)."""

    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    disconnected: Callable[[], bool]


# A stream route answers (code, content type, body): bytes are sent whole, an async iterator of chunks is
# streamed until it ends (no Content-Length; the connection's close ends the body).
StreamRoute = Callable[[StreamRequest], Awaitable[tuple[int, str, bytes | AsyncIterator[bytes]]]]

MAX_CONNECTIONS = 64
HEADER_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 30.0
MAX_HEAD_BYTES = 8192
MAX_PAGE_ITEMS = 500
MAX_PAGE_BYTES = 8 * 2**20
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    410: "Gone",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class StatusServer:
    def __init__(
        self,
        host: str,
        port: int,
        pods: Callable[[], dict[str, Any]],
        *,
        health: Callable[[], Sequence[str]] | None = None,
        extra_routes: Mapping[str, Route] = {},  # read only, never mutated
        stream_routes: Mapping[str, StreamRoute] = {},  # path prefix -> route; read only
        max_connections: int = MAX_CONNECTIONS,
        header_timeout: float = HEADER_TIMEOUT_S,
    ) -> None:
        self._pods = pods
        self._health = health
        self._routes = {path.rstrip("/") or "/": route for path, route in extra_routes.items()}
        self._stream_routes = dict(stream_routes)
        self._max_connections = max_connections
        self._header_timeout = header_timeout
        self._open: set[asyncio.StreamWriter] = set()
        self._idle: dict[asyncio.StreamWriter, None] = {}  # waiting for their request head, oldest first
        self._loop = asyncio.new_event_loop()
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="status-http")
        # Bound now (not in start()) so `address` is known and a taken port fails at construction.
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, host, port, limit=MAX_HEAD_BYTES, backlog=128)
        )
        self._thread = threading.Thread(target=self._loop.run_forever, name="status-http", daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host!s}:{port}"

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
            await self._server.wait_closed()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        else:
            self._loop.run_until_complete(close())
        self._loop.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ----- one connection --------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            if len(self._open) > self._max_connections:
                if not self._idle:
                    await self._send(writer, 503, "text/plain", b"too many connections\n")
                    return
                oldest = next(iter(self._idle))
                del self._idle[oldest]
                self._open.discard(oldest)  # counted out now: its coroutine ends on its own
                oldest.close()  # its read ends at once; the newcomer takes its place
            self._idle[writer] = None
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._header_timeout)
            except asyncio.LimitOverrunError:
                await self._send(writer, 431, "text/plain", b"request head too large\n")
                return
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                return  # a client that sends no request in time is dropped silently
            finally:
                self._idle.pop(writer, None)
            if self._stream_routes and await self._stream(head, reader, writer):
                return
            code, content_type, body = await self._answer(head)
            await self._send(writer, code, content_type, body)
        except Exception:
            log.exception("status endpoint: request failed")
        finally:
            self._open.discard(writer)
            writer.close()

    async def _answer(self, head: bytes) -> tuple[int, str, bytes]:
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, "text/plain", b"bad request line\n"
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"only GET is served\n"
        url = urllib.parse.urlsplit(target)
        path = url.path.rstrip("/") or "/"
        query = urllib.parse.parse_qs(url.query)
        loop = asyncio.get_running_loop()
        if path == "/healthz":
            return self._healthz()
        if path == "/pods":
            return await loop.run_in_executor(self._executor, self._pods_page, query)
        route = self._routes.get(path)
        if route is not None:
            return await loop.run_in_executor(self._executor, route)
        known = ", ".join(sorted({"/pods", "/healthz", *self._routes}))
        return 404, "text/plain", f"not found: try {known}\n".encode()

    async def _stream(self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer a GET under a stream route's prefix; False if the request is not for one."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            return False
        url = urllib.parse.urlsplit(parts[1])
        route = next((r for prefix, r in self._stream_routes.items() if url.path.startswith(prefix)), None)
        if route is None:
            return False
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        gone = asyncio.ensure_future(reader.read(1))  # completes when the client closes its side
        try:
            request = StreamRequest(url.path, urllib.parse.parse_qs(url.query), headers, gone.done)
            code, content_type, body = await route(request)
            if isinstance(body, bytes):
                await self._send(writer, code, content_type, body)
                return True
            head_out = (
                f"HTTP/1.1 {code} {_REASONS.get(code, 'Unknown')}\r\n"
                f"Content-Type: {content_type}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head_out.encode("latin-1"))
            try:
                async for chunk in body:
                    writer.write(chunk)
                    await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
            except (TimeoutError, ConnectionError):
                pass
            finally:
                aclose = getattr(body, "aclose", None)
                if aclose is not None:
                    await aclose()
            return True
        finally:
            gone.cancel()

    async def _send(self, writer: asyncio.StreamWriter, code: int, content_type: str, body: bytes) -> None:
        head = (
            f"HTTP/1.1 {code} {_REASONS.get(code, 'Unknown')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        with contextlib.suppress(TimeoutError, ConnectionError):
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)

    # ----- routes ------------------------------------------------------------------------------------

    def _healthz(self) -> tuple[int, str, bytes]:
        problems = list(self._health()) if self._health is not None else []
        if not problems:
            return 200, "text/plain", b"ok"
        lines = "".join(f"[-]{p}\n" for p in problems)
        return 500, "text/plain", f"{lines}healthz check failed\n".encode()

    def _pods_page(self, query: Mapping[str, list[str]]) -> tuple[int, str, bytes]:
        try:
            limit = int(query.get("limit", [str(MAX_PAGE_ITEMS)])[0])
            start = int(query.get("continue", ["0"])[0] or 0)
        except ValueError:
            return 400, "text/plain", b"limit and continue must be integers\n"
        limit = MAX_PAGE_ITEMS if limit <= 0 else min(limit, MAX_PAGE_ITEMS)
        document = self._pods()
        items: list[Any] = document.get("items", [])
        if not 0 <= start <= len(items):
            return 410, "text/plain", b"continue token is out of range; list again\n"
        encoded: list[bytes] = []
        size = 0
        end = start
        while end < len(items) and len(encoded) < limit:
            item = json.dumps(items[end], indent=1).encode()
            if encoded and size + len(item) > MAX_PAGE_BYTES:
                break
            encoded.append(item)
            size += len(item)
            end += 1
        document["items"] = []
        metadata = dict(document.get("metadata") or {})
        if end < len(items):
            metadata["continue"] = str(end)
            metadata["remainingItemCount"] = len(items) - end
        document["metadata"] = metadata
        # Items are encoded one by one (above, against the byte budget) and spliced into the document.
        shell = json.dumps(document, indent=1).encode()
        marker = b'"items": []'
        body = shell.replace(marker, b'"items": [\n' + b",\n".join(encoded) + b"\n]", 1)
        return 200, "application/json", body
