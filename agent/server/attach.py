"""`/attach/<namespace>/<pod>/<container>`: kubectl attach, over the same WebSocket channels as exec.

    GET ?stdin&stdout&stderr&tty -> refused before the upgrade, in one line, for an unknown or stopped
    container, or `stdin` asked of a container without `stdin: true` -> the upgrade -> the container's
    output from now on (its log file, followed: the runtime writes stdout and stderr there together, so
    it all arrives on the stdout channel) and the client's stdin written to the container's stdin FIFO
    (agent/kuberuntime/processes.py) -> when the container stops, a Success status and the close.
    A CRI pod's attach instead goes to the runtime's streaming server (CRI Attach's URL; streamproxy.py),
    with the container's own tty.

Limits of process pods: a container's `tty: true` gets no terminal (the runtime gives containers none),
so attach is never a tty; `stdinOnce` is not honoured (stdin stays open after the first attach).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import WSMsgType, web

from agent.container.streaming import StreamFlags
from agent.server.channels import CLOSE, MAX_MESSAGE, PROTOCOLS, STDIN, STDOUT, refuse, status, stream_flags
from agent.server.streamproxy import Upstream, proxy_remotecommand

FOLLOW_POLL_S = 0.1
READ_CHUNK = 32 * 1024


@dataclass(frozen=True)
class AttachTarget:
    log_path: Path
    stdin_path: Path | None  # None: the container was not started with stdin: true
    running: Callable[[], bool]  # still the same running container


# (namespace, pod, container, streams) -> the target (a process pod), the runtime's streaming URL (a CRI pod),
# or (HTTP code, why not).
ResolveAttach = Callable[[str, str, str, StreamFlags], Awaitable[AttachTarget | Upstream | tuple[int, str]]]


async def attach_handler(request: web.Request, resolve: ResolveAttach) -> web.StreamResponse:
    info = request.match_info
    offered = {p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")}
    if request.headers.get("Upgrade", "").lower() != "websocket" or not offered & set(PROTOCOLS):
        return refuse(400, f"attach: needs a WebSocket upgrade offering one of {', '.join(PROTOCOLS)}")
    flags = stream_flags(request.query)
    want_stdin = flags.stdin
    target = await resolve(info["namespace"], info["pod"], info["container"], flags)
    if isinstance(target, tuple):
        return refuse(*target)
    if isinstance(target, Upstream):
        return await proxy_remotecommand(request, target, flags)
    if want_stdin and target.stdin_path is None:
        return refuse(400, f"attach: container {info['container']} was not started with stdin: true")
    ws = web.WebSocketResponse(protocols=PROTOCOLS, max_msg_size=MAX_MESSAGE, autoping=True)
    await ws.prepare(request)
    stdin_fd = -1
    if want_stdin and target.stdin_path is not None:
        with contextlib.suppress(OSError):
            stdin_fd = os.open(target.stdin_path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    output = asyncio.ensure_future(_follow(ws, target, flags.stdout or flags.stderr))
    client = asyncio.ensure_future(_receive(ws, stdin_fd))
    try:
        await asyncio.wait((output, client), return_when=asyncio.FIRST_COMPLETED)
        if output.done():
            # Stop reading before closing: close() reads the client's close reply itself.
            client.cancel()
            await asyncio.gather(client, return_exceptions=True)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_bytes(status(0))
                await ws.close()
    finally:
        for task in (output, client):
            task.cancel()
        await asyncio.gather(output, client, return_exceptions=True)
        if stdin_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(stdin_fd)
    return ws


async def _receive(ws: web.WebSocketResponse, stdin_fd: int) -> None:
    """The client's stdin into the container's FIFO, until the client goes (its CLOSE only stops stdin)."""
    async for message in ws:
        if message.type != WSMsgType.BINARY or not message.data:
            continue
        channel, data = message.data[0], message.data[1:]
        if channel == STDIN and stdin_fd >= 0:
            await _write_all(stdin_fd, data)
        elif channel == CLOSE and data[:1] == bytes([STDIN]):
            stdin_fd = -1  # written no more; the handler closes the descriptor


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await asyncio.sleep(FOLLOW_POLL_S)  # the container is not reading: wait, do not drop
        except OSError:
            return


async def _follow(ws: web.WebSocketResponse, target: AttachTarget, wanted: bool) -> None:
    loop = asyncio.get_running_loop()
    try:
        offset = target.log_path.stat().st_size
    except OSError:
        offset = 0
    checked = loop.time()
    while True:
        try:
            with target.log_path.open("rb") as file:
                file.seek(offset)
                chunk = file.read(READ_CHUNK)
        except OSError:
            chunk = b""
        if chunk:
            offset += len(chunk)
            if wanted:
                await ws.send_bytes(bytes([STDOUT]) + chunk)
            continue
        if loop.time() - checked > 0.5:
            checked = loop.time()
            if not await loop.run_in_executor(None, target.running):
                break
        await asyncio.sleep(FOLLOW_POLL_S)
