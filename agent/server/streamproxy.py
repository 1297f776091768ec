"""Streams of CRI pods: kubectl's exec, attach and port-forward, proxied to the runtime's streaming server.

The kubelet answers these routes for a CRI pod by asking the runtime for a URL (CRI Exec, Attach,
PortForward) and proxying the client there. containerd 1.6's streaming server (the kubelet's old
cri/streaming package) speaks SPDY/3.1, and WebSocket only with the pre-v5 channel protocols, which cannot
close stdin; kubectl 1.30+ speaks WebSocket v5.channel.k8s.io to us, and the API server forwards only
WebSocket. So the agent does what kube-apiserver's stream translator does: it ends kubectl's WebSocket
itself and is a SPDY client of the streaming server:

    the runtime's URL (http://127.0.0.1:<port>/<exec|attach|portforward>/<token>, one use) -> `upgrade`:
    POST with `Upgrade: SPDY/3.1` and `X-Stream-Protocol-Version` (v4.channel.k8s.io, or portforward.k8s.io)
    -> 101, or one line naming what the server answered (or why the runtime gave no URL) ->
    exec, attach (`proxy_remotecommand`): the client's WebSocket upgraded -> SPDY streams opened (error,
    then stdin, stdout, stderr, resize as asked) and their SYN_REPLYs awaited (the server drops data sent
    before) -> channel 0 and 4 messages become stdin and resize DATA;
    v5's close of stdin a FIN on the stdin stream -> stdout and stderr DATA become channel 1 and 2
    messages -> when the server hangs up, the error stream's metav1.Status (Success, or NonZeroExitCode
    with the code) goes out on channel 3 and the WebSocket closes. A refusal is a Status there too.
    port-forward (`proxy_port_forward`): kubectl already speaks SPDY inside its WebSocket tunnel
    (SPDY/3.1+portforward.k8s.io), so the WebSocket's binary messages and the upgraded connection's bytes
    are spliced both ways, unchanged. A refusal: the agent's own SPDY session answers every forwarded
    connection's error stream with the line (portforward.py), which kubectl prints.
Either side ending ends the other: the runtime's connection is closed, the WebSocket closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

from agent.container.streaming import StreamFlags
from agent.server.channels import (
    CLOSE,
    ERROR,
    MAX_MESSAGE,
    PROTOCOLS,
    RESIZE,
    STDERR,
    STDIN,
    STDOUT,
    status,
)
from agent.server.spdy import GOAWAY, PING, SYN_REPLY, Codec, SpdyError

log = logging.getLogger(__name__)

REMOTECOMMAND = "v4.channel.k8s.io"
PORTFORWARD = "portforward.k8s.io"
TUNNEL = "SPDY/3.1+portforward.k8s.io"  # kubectl's WebSocket subprotocol for port-forward
CONNECT_TIMEOUT_S = 10.0
READ_CHUNK = 32 * 1024
MAX_STATUS = 64 * 1024
MAX_HEAD = 16 * 1024


@dataclass(frozen=True)
class Upstream:
    """A CRI runtime's streaming URL for one exec, attach or port-forward."""

    url: str
    what: str  # "exec in container main of pod web", for the lines that name it
    error: str = ""  # the runtime refused the call (no URL): the client is told after its upgrade


class UpstreamError(Exception):
    """The streaming server could not be reached or refused the upgrade (one line)."""


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def upgrade(url: str, protocol: str) -> Connection:
    """The SPDY/3.1 upgrade of a streaming URL, as client-go's SPDY round tripper asks for it."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise UpstreamError(f"streaming URL {url!r}: only http:// URLs are served")
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname, parts.port or 80, limit=MAX_HEAD), CONNECT_TIMEOUT_S
        )
    except (OSError, TimeoutError) as exc:
        raise UpstreamError(f"streaming server {parts.netloc}: {exc or 'connect timed out'}") from None
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    writer.write(
        f"POST {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
        f"X-Stream-Protocol-Version: {protocol}\r\nContent-Length: 0\r\n\r\n".encode()
    )
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT_S)
        lines = head.decode("latin-1").split("\r\n")
        code = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if code != 101:
            body = await asyncio.wait_for(reader.read(min(int(headers.get("content-length", 0)), 4096)), 2)
            text = " ".join(body.decode(errors="replace").split()) or lines[0]
            raise UpstreamError(f"streaming server {parts.netloc} answered {code}: {text}")
        if headers.get("x-stream-protocol-version") != protocol:
            raise UpstreamError(f"streaming server {parts.netloc} does not speak {protocol}")
    except (OSError, TimeoutError, ValueError, IndexError, asyncio.IncompleteReadError) as exc:
        writer.close()
        raise UpstreamError(f"streaming server {parts.netloc}: no upgrade ({exc or 'timed out'})") from None
    except UpstreamError:
        writer.close()
        raise
    return reader, writer


async def dial(upstream: Upstream, protocol: str) -> Connection | str:
    """The upgraded connection, or the one line saying why not (the runtime's refusal, or its server's)."""
    problem = upstream.error
    if not problem:
        try:
            return await upgrade(upstream.url, protocol)
        except UpstreamError as exc:
            problem = str(exc)
    log.info("cannot %s: %s", upstream.what, problem)
    return f"cannot {upstream.what}: {problem}"


async def _until_either(
    first: Coroutine[Any, Any, None], second: Coroutine[Any, Any, None]
) -> asyncio.Task[None]:
    """Run both; when one ends, cancel the other. Returns the one that ended."""
    tasks = [asyncio.ensure_future(first), asyncio.ensure_future(second)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return next(iter(done))


# ----- exec and attach: WebSocket channels <-> SPDY streams -------------------------------------------


class _RemoteCommand:
    def __init__(self, ws: web.WebSocketResponse, connection: Connection, flags: StreamFlags) -> None:
        self._ws = ws
        self._reader, self._writer = connection
        self._codec = Codec()
        kinds = ["error"]
        kinds += ["stdin"] if flags.stdin else []
        kinds += ["stdout"] if flags.stdout else []
        kinds += ["stderr"] if flags.stderr and not flags.tty else []
        kinds += ["resize"] if flags.tty else []
        self._ids = {kind: 1 + 2 * n for n, kind in enumerate(kinds)}  # a client's streams: odd, rising
        self._channels = {self._ids.get("stdout", 0): STDOUT, self._ids.get("stderr", 0): STDERR}
        self._status = bytearray()
        # The server drops data on a stream it has not replied to yet (spdystream), so the client's data
        # waits for every SYN_REPLY, as client-go's CreateStream does.
        self._replied = {ident: asyncio.Event() for ident in self._ids.values()}

    async def run(self) -> None:
        for kind, ident in self._ids.items():
            self._writer.write(self._codec.syn_stream(ident, {"streamtype": kind}))
        runtime = self._from_runtime()
        ended = await _until_either(runtime, self._from_client())
        if ended.exception() is not None:
            log.info("stream to the runtime ended: %s", ended.exception())
        with contextlib.suppress(ConnectionError, RuntimeError):
            if ended.get_coro() is runtime and not self._ws.closed:  # the runtime hung up: the exit status
                await self._ws.send_bytes(self._final_status())
            await self._ws.close()

    def _final_status(self) -> bytes:
        if self._status:
            return bytes([ERROR]) + bytes(self._status)
        return status(None, "the container runtime's stream ended without an exit status")

    async def _from_runtime(self) -> None:
        while chunk := await self._reader.read(READ_CHUNK):
            for frame in self._codec.feed(chunk):
                if not frame.control:
                    await self._data(frame.stream, frame.payload)
                elif frame.kind == SYN_REPLY and frame.stream in self._replied:
                    self._replied[frame.stream].set()
                elif frame.kind == PING:
                    self._writer.write(self._codec.ping(frame.value))
                elif frame.kind == GOAWAY:
                    log.debug("streaming server sent GOAWAY")

    async def _data(self, stream: int, payload: bytes) -> None:
        if stream == self._ids["error"]:
            self._status += payload[: MAX_STATUS - len(self._status)]
        elif payload and stream in self._channels:
            await self._ws.send_bytes(bytes([self._channels[stream]]) + payload)

    async def _from_client(self) -> None:
        stdin, resize = self._ids.get("stdin"), self._ids.get("resize")
        await asyncio.gather(*(replied.wait() for replied in self._replied.values()))
        async for message in self._ws:
            if message.type != WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            if channel == STDIN and stdin:
                self._writer.write(self._codec.data(stdin, data))
            elif channel == RESIZE and resize:
                self._writer.write(self._codec.data(resize, data))
            elif channel == CLOSE and data[:1] == bytes([STDIN]) and stdin:
                self._writer.write(self._codec.data(stdin, b"", fin=True))
                stdin = None
            await self._writer.drain()  # back-pressure: stop reading the client meanwhile


async def proxy_remotecommand(
    request: web.Request, upstream: Upstream, flags: StreamFlags
) -> web.StreamResponse:
    """exec or attach through the runtime's streaming server (the module's flow). The client is upgraded
    first, as kube-apiserver's stream translator does: a failure after that is a Status on the error channel,
    which kubectl prints (a refused upgrade would send it to its SPDY fallback, which the API server
    refuses)."""
    ws = web.WebSocketResponse(protocols=PROTOCOLS, max_msg_size=MAX_MESSAGE, autoping=True)
    await ws.prepare(request)
    connection = await dial(upstream, REMOTECOMMAND)
    if isinstance(connection, str):
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_bytes(status(None, connection))
            await ws.close()
        return ws
    try:
        await _RemoteCommand(ws, connection, flags).run()
    except (SpdyError, ConnectionError) as exc:
        log.info("%s: %s", upstream.what, exc)
    finally:
        connection[1].close()
    return ws


# ----- port-forward: SPDY bytes spliced both ways ---------------------------------------------------------


async def _splice(ws: web.WebSocketResponse, connection: Connection) -> None:
    reader, writer = connection

    async def up() -> None:
        async for message in ws:
            if message.type == WSMsgType.BINARY:
                writer.write(message.data)
                await writer.drain()

    async def down() -> None:
        while chunk := await reader.read(READ_CHUNK):
            await ws.send_bytes(chunk)

    await _until_either(up(), down())


async def proxy_port_forward(request: web.Request, connection: Connection) -> web.StreamResponse:
    """The tunnel spliced to a connection `dial` made (portforward.py dials: its own session answers when
    the runtime refuses)."""
    ws = web.WebSocketResponse(protocols=(TUNNEL,), max_msg_size=MAX_MESSAGE, autoping=True)
    try:
        await ws.prepare(request)
        await _splice(ws, connection)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.close()
    finally:
        connection[1].close()
    return ws
