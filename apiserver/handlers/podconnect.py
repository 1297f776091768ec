"""pods/exec, pods/attach and pods/portforward: WebSocket streams proxied to the pod's node.

    kubectl's GET with `Upgrade: websocket` -> the pod, node and container (handlers/nodeproxy.py; 400 for a
    pod that is not running or a container that is not) -> a WebSocket to
    wss://<node>/{exec,attach}/<ns>/<pod>/<container>?<the same query> offering the client's subprotocols,
    with this server's kubelet client certificate -> the agent's refusal (before any upgrade) is answered as
    a Status with its code; its acceptance upgrades the client with the subprotocol the agent chose ->
    messages pumped both ways, unchanged, until either side closes.

Served: WebSocket with the channel protocols the agent speaks (v5.channel.k8s.io and v4.channel.k8s.io; see
agent/server/remotecommand.py), which kubectl 1.30+ uses for exec and attach. Not served: SPDY/3.1 (the
fallback kubectl tries when the WebSocket upgrade fails, and what its port-forward tunnels inside a
WebSocket): those requests get one 400 naming the protocol, after the same pod checks, so kubectl prints
the real reason (a pod that is not running) rather than the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from typing import Any

import aiohttp
from aiohttp import web

from apiserver.handlers.common import ApiContext
from apiserver.handlers.nodeproxy import CONNECT_TIMEOUT_S, Target, agent_error, locate, upstream_error
from apiserver.request import RequestInfo
from apiserver.status import bad_request

REFUSAL_HEADER = (
    "X-Kubenode-Refusal"  # the agent's reason for a refused upgrade (agent/server/remotecommand.py)
)
AGENT_PATHS = {"exec": "exec", "attach": "attach", "portforward": "portForward"}
# WebSocket messages are bounded by the client's buffer (client-go reads 32 KiB); leave room for framing.
MAX_MESSAGE = 4 * 2**20


def _check_running(target: Target, name: str, subresource: str) -> None:
    pod = target.pod
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if phase in ("Succeeded", "Failed"):
        raise bad_request(
            f"cannot {subresource} into a container in a completed pod; current phase is {phase}"
        )
    if subresource == "portforward":
        if phase != "Running":
            raise bad_request(f"pod {name} is not running (phase {phase}): cannot forward ports to it")
        return
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    statuses += (pod.get("status") or {}).get("initContainerStatuses") or []
    state = next((s.get("state") or {} for s in statuses if s.get("name") == target.container), {})
    if "running" not in state:
        now = next(iter(state), "not started")
        raise bad_request(
            f"container {target.container} in pod {name} is not running ({now}): cannot {subresource}"
        )


def _check_stdin(target: Target, request: web.Request) -> None:
    """attach -i needs a container started with `stdin: true` (checked here too, so kubectl's SPDY fallback
    after the agent's refusal still shows this reason)."""
    if request.query.get("stdin", "").lower() not in ("1", "true"):
        return
    spec = target.pod.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if c.get("name") == target.container and c.get("stdin") is not True:
            raise bad_request(f"attach: container {target.container} was not started with stdin: true")


def _is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


async def connect(request: web.Request, ctx: ApiContext, info: RequestInfo) -> web.StreamResponse:
    subresource = info.subresource
    container = None if subresource == "portforward" else request.query.get("container", "")
    target = locate(ctx, info, container, what=f"{subresource} through")
    _check_running(target, info.name, subresource)
    if subresource == "attach":
        _check_stdin(target, request)
    if not _is_websocket(request):
        upgrade = request.headers.get("Upgrade") or "none"
        raise bad_request(
            f"pods/{subresource}: upgrade {upgrade!r} is not served; this server speaks WebSocket "
            "(v5.channel.k8s.io, v4.channel.k8s.io) only"
        )
    quote = urllib.parse.quote
    path = f"/{AGENT_PATHS[subresource]}/{quote(info.namespace)}/{quote(info.name)}"
    if target.container:
        path += f"/{quote(target.container)}"
    url = target.base_url + path
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S)
    connector = aiohttp.TCPConnector(ssl=target.dialer.ssl)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        try:
            upstream = await session.ws_connect(
                url,
                params=list(request.query.items()),
                protocols=offered,
                max_msg_size=MAX_MESSAGE,
                autoping=True,
                heartbeat=None,
            )
        except aiohttp.WSServerHandshakeError as exc:
            sent = exc.headers.get(REFUSAL_HEADER) if exc.headers is not None else None
            reason = sent or f"the node refused the upgrade ({exc.message})"
            raise agent_error(exc.status, reason) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise upstream_error(url, exc) from None
        async with upstream:
            protocols = (upstream.protocol,) if upstream.protocol else ()
            client = web.WebSocketResponse(protocols=protocols, max_msg_size=MAX_MESSAGE, autoping=True)
            await client.prepare(request)
            await _pump(client, upstream)
            return client


async def _pump(client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse) -> None:
    """Copy data messages both ways; when one side closes, close the other (with its code)."""

    async def copy(source: Any, sink: Any) -> None:
        async for message in source:
            if message.type == aiohttp.WSMsgType.BINARY:
                await sink.send_bytes(message.data)
            elif message.type == aiohttp.WSMsgType.TEXT:
                await sink.send_str(message.data)

    up = asyncio.ensure_future(copy(client, upstream))
    down = asyncio.ensure_future(copy(upstream, client))
    try:
        await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Stop both readers before closing: each close() reads the peer's close reply itself.
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
        code = upstream.close_code if down.done() else client.close_code
        with contextlib.suppress(ConnectionError, RuntimeError):
            await client.close(code=code or aiohttp.WSCloseCode.OK)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await upstream.close(code=code or aiohttp.WSCloseCode.OK)
