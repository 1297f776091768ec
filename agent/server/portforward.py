"""`/portForward/<namespace>/<pod>`: kubectl port-forward, as the kubelet serves portforward.k8s.io over SPDY,
here inside the WebSocket tunnel kubectl 1.31+ opens (subprotocol `SPDY/3.1+portforward.k8s.io`).

    the upgrade (refused before it, in one line, for a pod that is not here or not running) -> SPDY frames
    (spdy.py) from the WebSocket's binary messages -> every SYN_STREAM answered with a SYN_REPLY; per
    forwarded connection kubectl opens an `error` stream and a `data` stream with the same `requestID` and
    `port` headers -> the port checked (`allowed`) -> a TCP connection to 127.0.0.1:<port> (process pods
    share the host's network) -> bytes copied both ways as DATA frames; the end of either side is a FIN ->
    the error stream closed empty (success), or carrying one line saying why (a port the pod does not
    serve, a refused connection), which kubectl prints.

A CRI pod's port-forward instead goes to the runtime's streaming server (CRI PortForward's URL), the SPDY
bytes spliced unchanged (streamproxy.py): the runtime dials the port in the pod's network namespace, which
here is the node's (no CNI), and applies no check of its own.

Which ports (process pods): one the pod declares (`containerPorts`) or one a process in the pod cgroup
listens on; any other port is refused, so a forward cannot reach the node's other services. PINGs are
answered; a protocol error ends the connection with GOAWAY and the endpoint keeps serving others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import WSMsgType, web

from agent.server.channels import refuse
from agent.server.spdy import (
    PING,
    RST_REFUSED_STREAM,
    RST_STREAM,
    SYN_STREAM,
    Codec,
    Frame,
    SpdyError,
)
from agent.server.streamproxy import PORTFORWARD, Upstream, dial, proxy_port_forward
from agent.server.streamproxy import TUNNEL as PROTOCOL

log = logging.getLogger(__name__)

MAX_STREAMS = 128
READ_CHUNK = 32 * 1024
CONNECT_TIMEOUT_S = 10.0

# (port) -> None if the pod serves it, else why not (one line).
PortCheck = Callable[[int], Awaitable[str | None]]
# (namespace, pod) -> the pod's port check (a process pod), the runtime's streaming URL (a CRI pod), or
# (HTTP code, why not).
ResolvePod = Callable[[str, str], Awaitable[PortCheck | Upstream | tuple[int, str]]]


@dataclass
class _Stream:
    ident: int
    headers: dict[str, str]
    pending: bytearray = field(default_factory=bytearray)
    writer: asyncio.StreamWriter | None = None
    closed_by_client: bool = False  # its FIN arrived
    reset: bool = False  # its RST_STREAM arrived


class _Session:
    def __init__(self, ws: web.WebSocketResponse, check: PortCheck, pod: str) -> None:
        self._ws = ws
        self._check = check
        self._pod = pod
        self._codec = Codec()
        self._out: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams: dict[int, _Stream] = {}
        self._errors: dict[str, int] = {}  # requestID -> its error stream
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, frame: bytes) -> None:
        self._out.put_nowait(frame)  # queued in order: header compression is one stream per connection

    async def _writer(self) -> None:
        while (frame := await self._out.get()) is not None:
            await self._ws.send_bytes(frame)

    async def run(self) -> None:
        writer = asyncio.ensure_future(self._writer())
        try:
            async for message in self._ws:
                if message.type != WSMsgType.BINARY:
                    continue
                for frame in self._codec.feed(message.data):
                    await self._handle(frame)
        except SpdyError as exc:
            log.info("port-forward to pod %s: %s", self._pod, exc)
            self.send(self._codec.goaway(max(self._streams, default=0)))
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for stream in self._streams.values():
                if stream.writer is not None:
                    stream.writer.close()
            self._out.put_nowait(None)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await asyncio.wait_for(writer, 5)
            writer.cancel()

    async def _handle(self, frame: Frame) -> None:
        if frame.control and frame.kind == PING:
            self.send(self._codec.ping(frame.value))
        elif frame.control and frame.kind == SYN_STREAM:
            self._open(frame)
        elif frame.control and frame.kind == RST_STREAM:
            stream = self._streams.get(frame.stream)
            if stream is not None:
                stream.reset = True
                if stream.writer is not None:
                    stream.writer.close()
        elif not frame.control:
            stream = self._streams.get(frame.stream)
            if stream is None:
                return
            if stream.writer is None:
                stream.pending += frame.payload
            elif frame.payload:
                stream.writer.write(frame.payload)
                with contextlib.suppress(ConnectionError):
                    await stream.writer.drain()  # back-pressure: stop reading the tunnel meanwhile
            if frame.fin:
                stream.closed_by_client = True
                if stream.writer is not None and stream.writer.can_write_eof():
                    with contextlib.suppress(OSError):
                        stream.writer.write_eof()

    def _open(self, frame: Frame) -> None:
        if len(self._streams) >= MAX_STREAMS:
            self.send(self._codec.rst_stream(frame.stream, RST_REFUSED_STREAM))
            return
        stream = _Stream(frame.stream, frame.headers)
        self._streams[frame.stream] = stream
        self.send(self._codec.syn_reply(frame.stream))
        kind, request = frame.headers.get("streamtype", ""), frame.headers.get("requestid", "")
        if kind == "error":
            self._errors[request] = frame.stream
        elif kind == "data":
            task = asyncio.ensure_future(self._forward(stream, self._errors.pop(request, 0)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _finish(self, error_stream: int, message: str) -> None:
        if error_stream:
            self.send(self._codec.data(error_stream, message.encode(), fin=True))
            self._streams.pop(error_stream, None)

    async def _forward(self, stream: _Stream, error_stream: int) -> None:
        text = stream.headers.get("port", "")
        port = int(text) if text.isdigit() and 0 < int(text) < 65536 else 0
        problem = f"invalid port header {text!r}" if not port else await self._check(port)
        if problem is None:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), CONNECT_TIMEOUT_S
                )
            except (OSError, TimeoutError) as exc:
                problem = f"error forwarding port {port} to pod {self._pod}: dial 127.0.0.1:{port}: {exc}"
        if problem is not None:
            self._finish(error_stream, problem)
            self.send(self._codec.data(stream.ident, b"", fin=True))
            self._streams.pop(stream.ident, None)
            return
        stream.writer = writer
        if stream.pending:
            writer.write(bytes(stream.pending))
            stream.pending.clear()
        if stream.closed_by_client and writer.can_write_eof():
            writer.write_eof()
        try:
            while chunk := await reader.read(READ_CHUNK):
                self.send(self._codec.data(stream.ident, chunk))
        except OSError:
            pass
        finally:
            writer.close()
            if not stream.reset:
                self.send(self._codec.data(stream.ident, b"", fin=True))
            self._streams.pop(stream.ident, None)
            self._finish(error_stream, "")


def _refusing(line: str) -> PortCheck:
    async def check(port: int) -> str | None:
        return line

    return check


async def portforward_handler(request: web.Request, resolve: ResolvePod) -> web.StreamResponse:
    info = request.match_info
    offered = {p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")}
    if request.headers.get("Upgrade", "").lower() != "websocket" or PROTOCOL not in offered:
        return refuse(400, f"portForward: needs a WebSocket upgrade offering {PROTOCOL}")
    resolved = await resolve(info["namespace"], info["pod"])
    if isinstance(resolved, tuple):
        return refuse(*resolved)
    if isinstance(resolved, Upstream):
        connection = await dial(resolved, PORTFORWARD)
        if not isinstance(connection, str):
            return await proxy_port_forward(request, connection)
        resolved = _refusing(connection)  # each forwarded connection is told why, as kubectl expects
    ws = web.WebSocketResponse(protocols=(PROTOCOL,), max_msg_size=4 * 2**20, autoping=True)
    await ws.prepare(request)
    await _Session(ws, resolved, info["pod"]).run()
    await ws.close()
    return ws
