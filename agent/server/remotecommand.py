"""`/exec/<namespace>/<pod>/<container>`: a command in a running container, streamed over a WebSocket with
Kubernetes' channel protocol, as the kubelet's streaming server serves it.

    GET ?command=..&command=..&input&output&error&tty=1 (the names kube-apiserver sends the kubelet; kubectl's
    stdin, stdout, stderr=true as well), `Upgrade: websocket`, offering v5.channel.k8s.io
    (or v4.channel.k8s.io) -> refused before the upgrade with one plain-text line (400 for a bad query or a
    protocol we do not speak, 404 for an unknown pod or container, 400 for one that is not running) ->
    the upgrade -> the process started (agent/kuberuntime/execstream.py) -> messages until it exits.
    A CRI pod's exec instead goes to the runtime's streaming server (CRI Exec's URL; streamproxy.py).

The framing is channels.py's. v5's `[255, 0]` closes stdin (the process sees end of input). When the process
has exited and its output is sent, the error channel carries a metav1.Status: `Success`, or `Failure` with
reason NonZeroExitCode and the code as the `ExitCode` cause (kubectl exits with it), or the reason the
command could not run; then the WebSocket closes. If the client goes first, the process and its session are
killed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import WSMsgType, web

from agent.container.streaming import StreamFlags
from agent.kuberuntime.execstream import ExecSession, ExecSpec
from agent.kuberuntime.processes import ProcessStartError
from agent.server.channels import (
    CLOSE,
    MAX_MESSAGE,
    PROTOCOLS,
    RESIZE,
    STDERR,
    STDIN,
    STDOUT,
    refuse,
    status,
    stream_flags,
)
from agent.server.streamproxy import Upstream, proxy_remotecommand

log = logging.getLogger(__name__)

FIRST_SIZE_WAIT_S = 1.0

# (namespace, pod, container, command, streams) -> what to run (a process pod), the runtime's streaming URL
# (a CRI pod), or (HTTP code, why not).
Resolve = Callable[[str, str, str, list[str], StreamFlags], Awaitable[ExecSpec | Upstream | tuple[int, str]]]


async def exec_handler(request: web.Request, resolve: Resolve) -> web.StreamResponse:
    info = request.match_info
    query = request.query
    command = query.getall("command", [])
    if not command:
        return refuse(400, "exec: no command given (?command=)")
    flags = stream_flags(query)
    tty, stdin = flags.tty, flags.stdin
    if tty and flags.stderr:
        return refuse(400, "exec: tty and stderr cannot both be true")
    offered = {p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")}
    if request.headers.get("Upgrade", "").lower() != "websocket" or not offered & set(PROTOCOLS):
        return refuse(400, f"exec: needs a WebSocket upgrade offering one of {', '.join(PROTOCOLS)}")
    resolved = await resolve(info["namespace"], info["pod"], info["container"], command, flags)
    if isinstance(resolved, tuple):
        return refuse(*resolved)
    if isinstance(resolved, Upstream):
        return await proxy_remotecommand(request, resolved, flags)
    ws = web.WebSocketResponse(protocols=PROTOCOLS, max_msg_size=MAX_MESSAGE, autoping=True)
    await ws.prepare(request)
    early: list[bytes] = []
    size = await _first_size(ws, early) if tty else None
    try:
        session = await ExecSession.start(resolved, stdin=stdin, tty=tty, size=size)
    except ProcessStartError as exc:
        await ws.send_bytes(status(None, f"cannot exec in container {info['container']}: {exc}"))
        await ws.close()
        return ws
    try:
        for data in early:
            await _handle(session, data)
        await _serve(ws, session, want_stdout=tty or flags.stdout, want_stderr=flags.stderr)
    finally:
        session.kill()
        session.close()
    return ws


def _size(data: bytes) -> tuple[int, int] | None:
    """A resize message's (width, height); None for one that does not parse."""
    try:
        size = json.loads(data)
        return int(size.get("Width", 0)), int(size.get("Height", 0))
    except (ValueError, TypeError, AttributeError):
        return None


async def _first_size(ws: web.WebSocketResponse, early: list[bytes]) -> tuple[int, int] | None:
    """With a tty, kubectl sends the terminal's size first: wait for it (FIRST_SIZE_WAIT_S at most) so
    the command starts with the right size; what else arrives meanwhile is kept for the session."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FIRST_SIZE_WAIT_S
    while (left := deadline - loop.time()) > 0:
        try:
            message = await ws.receive(timeout=left)
        except TimeoutError:
            return None
        if message.type != WSMsgType.BINARY:
            if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return None
            continue
        if message.data[:1] == bytes([RESIZE]):
            return _size(message.data[1:])
        early.append(message.data)
    return None


async def _handle(session: ExecSession, message: bytes) -> None:
    channel, data = message[0], message[1:]
    if channel == STDIN:
        await session.write_stdin(data)
    elif channel == RESIZE:
        size = _size(data)
        if size is not None:
            session.resize(*size)
    elif channel == CLOSE and data[:1] == bytes([STDIN]):
        session.close_stdin()


async def _serve(
    ws: web.WebSocketResponse, session: ExecSession, *, want_stdout: bool, want_stderr: bool
) -> None:
    async def pump(read: Callable[[], Awaitable[bytes]], channel: int, wanted: bool) -> None:
        while chunk := await read():
            if wanted:
                await ws.send_bytes(bytes([channel]) + chunk)

    async def receive() -> None:
        async for message in ws:
            if message.type == WSMsgType.BINARY and message.data:
                await _handle(session, message.data)

    outputs: asyncio.Future[Any] = asyncio.gather(
        pump(session.read_stdout, STDOUT, want_stdout), pump(session.read_stderr, STDERR, want_stderr)
    )
    client: asyncio.Future[Any] = asyncio.ensure_future(receive())
    try:
        done, _ = await asyncio.wait({outputs, client}, return_when=asyncio.FIRST_COMPLETED)
        if client in done and outputs not in done:
            return  # the client went first: the caller kills the process
        code = await session.wait()
        # Stop reading before closing: close() reads the client's close reply itself.
        client.cancel()
        await asyncio.gather(client, return_exceptions=True)
        await ws.send_bytes(status(code))
        await ws.close()
    except (ConnectionError, RuntimeError) as exc:
        log.debug("exec stream ended: %s", exc)
    finally:
        client.cancel()
        outputs.cancel()
        await asyncio.gather(client, outputs, return_exceptions=True)
