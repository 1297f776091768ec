"""The authenticated daemon endpoint (the kubelet's server on --port 10250): HTTPS for the API server.

    TLS with the node's serving certificate (agent/certificate/servingcert.py: a kubelet-serving CSR
    signed by the cluster CA), client certificates verified against that CA -> auth.py: no certificate
    401, a caller the API server's SubjectAccessReview denies 403 -> the route:
      /containerLogs/<ns>/<pod>/<container>   container logs (containerlogs.py)
      /exec/<ns>/<pod>/<container>            a command over a WebSocket (remotecommand.py)
      /attach/<ns>/<pod>/<container>          the container's output and stdin (attach.py)
      /portForward/<ns>/<pod>                 SPDY port-forward in a WebSocket tunnel (portforward.py)
      /pods, /healthz                         as on the status endpoint

It runs an aiohttp application on its own thread and loop, like the status endpoint (httpapi.py), which
stays plain HTTP for local readers (systemd, `kubenode agent status`, `kubenode up`) and serves no logs
or exec. The Node's daemonEndpoints.kubeletEndpoint.Port names this endpoint's port. The agent builds it
on the first connection to a socket bound at start (lazysecure.py), which it is then given as `sock`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web

from agent.server.attach import ResolveAttach, attach_handler
from agent.server.auth import Authorizer, attributes, forbidden, identity_of
from agent.server.channels import refuse
from agent.server.httpapi import StreamRequest, StreamRoute
from agent.server.portforward import ResolvePod, portforward_handler
from agent.server.remotecommand import Resolve, exec_handler

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class SecureServer:
    def __init__(
        self,
        host: str,
        port: int,
        tls: ssl.SSLContext,
        node: str,
        authorizer: Authorizer,
        *,
        pods: Callable[[], dict[str, Any]],
        container_logs: StreamRoute,
        resolve_exec: Resolve,
        resolve_pod: ResolvePod,
        resolve_attach: ResolveAttach,
        reads: Mapping[str, Callable[[], tuple[int, str, bytes]]] | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        self._node = node
        self._authorizer = authorizer
        self._pods = pods
        self._logs = container_logs
        self._resolve = resolve_exec
        self._resolve_pod = resolve_pod
        self._resolve_attach = resolve_attach
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="secure-http")
        self._loop = asyncio.new_event_loop()
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/pods", self._pods_route)
        # Plain reads (/stats/summary, /metrics/resource): the API server scrapes them for `kubectl top`.
        for path, read in (reads or {}).items():
            app.router.add_get(path, self._read_route(read))
        app.router.add_get("/containerLogs/{tail:.+}", self._logs_route)
        app.router.add_route("*", "/exec/{namespace}/{pod}/{container}", self._exec_route)
        app.router.add_route("*", "/attach/{namespace}/{pod}/{container}", self._attach_route)
        app.router.add_route("*", "/portForward/{namespace}/{pod}", self._portforward_route)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        self._loop.run_until_complete(self._runner.setup())
        site: web.BaseSite
        if sock is not None:  # bound already (lazysecure.py): host and port are the socket's
            site = web.SockSite(self._runner, sock, ssl_context=tls)
        else:
            site = web.TCPSite(self._runner, host, port, ssl_context=tls)
        self._loop.run_until_complete(site.start())  # bound now, so a taken port fails at construction
        self._thread = threading.Thread(target=self._loop.run_forever, name="secure-http", daemon=True)

    @property
    def address(self) -> str:
        host, port = self._runner.addresses[0][:2]
        return f"{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        else:
            self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        who = identity_of(ssl_object.getpeercert() if ssl_object is not None else None)
        if who is None:
            return refuse(401, "Unauthorized: no client certificate from the cluster CA")
        what = attributes(request.method, request.path)
        loop = asyncio.get_running_loop()
        allowed, reason = await loop.run_in_executor(self._executor, self._authorizer.decide, who, what)
        if not allowed:
            return refuse(403, forbidden(who, what, self._node, reason))
        return await handler(request)

    async def _healthz(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    def _read_route(self, read: Callable[[], tuple[int, str, bytes]]) -> Handler:
        async def route(request: web.Request) -> web.StreamResponse:
            status, content_type, body = await asyncio.get_running_loop().run_in_executor(
                self._executor, read
            )
            return web.Response(status=status, body=body, headers={"Content-Type": content_type})

        return route

    async def _pods_route(self, request: web.Request) -> web.StreamResponse:
        document = await asyncio.get_running_loop().run_in_executor(self._executor, self._pods)
        return web.Response(body=json.dumps(document).encode(), content_type="application/json")

    async def _exec_route(self, request: web.Request) -> web.StreamResponse:
        return await exec_handler(request, self._resolve)

    async def _attach_route(self, request: web.Request) -> web.StreamResponse:
        return await attach_handler(request, self._resolve_attach)

    async def _portforward_route(self, request: web.Request) -> web.StreamResponse:
        return await portforward_handler(request, self._resolve_pod)

    async def _logs_route(self, request: web.Request) -> web.StreamResponse:
        query: Mapping[str, list[str]] = {k: request.query.getall(k) for k in request.query}
        headers = {k.lower(): v for k, v in request.headers.items()}
        transport = request.transport

        def gone() -> bool:
            return transport is None or transport.is_closing()

        code, content_type, body = await self._logs(StreamRequest(request.path, query, headers, gone))
        if isinstance(body, bytes):
            return web.Response(status=code, body=body, content_type=content_type.split(";")[0])
        response = web.StreamResponse(status=code, headers={"Content-Type": content_type})
        await response.prepare(request)
        try:
            async for chunk in body:
                await response.write(chunk)
        except ConnectionError:
            pass
        finally:
            aclose = getattr(body, "aclose", None)
            if aclose is not None:
                await aclose()
        return response
