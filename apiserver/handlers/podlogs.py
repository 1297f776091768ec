"""GET pods/{name}/log: proxied to the node's daemon endpoint, as kube-apiserver's LogREST does.

the pod, its node and container (handlers/nodeproxy.py) -> GET
https://<address>:<port>/containerLogs/<ns>/<pod>/<container>?follow&previous&tailLines&sinceSeconds&
timestamps&limitBytes with this server's kubelet client certificate -> the agent's answer streamed back as
text/plain (a followed log chunk by chunk); the agent's error
text becomes a Status with its code.
"""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime

import aiohttp
from aiohttp import web

from apiserver.handlers.common import ApiContext
from apiserver.handlers.nodeproxy import CONNECT_TIMEOUT_S, agent_error, locate, upstream_error
from apiserver.request import RequestInfo
from apiserver.status import bad_request

PASSED_PARAMS = ("follow", "previous", "tailLines", "sinceSeconds", "timestamps", "limitBytes")


def _query(request: web.Request) -> dict[str, str]:
    query = {k: request.query[k] for k in PASSED_PARAMS if k in request.query}
    since_time = request.query.get("sinceTime")
    if since_time and "sinceSeconds" not in query:
        try:
            when = datetime.fromisoformat(since_time.replace("Z", "+00:00"))
        except ValueError:
            raise bad_request(f"sinceTime: not an RFC 3339 time: {since_time!r}") from None
        query["sinceSeconds"] = str(max(1, int((datetime.now(UTC) - when).total_seconds())))
    return query


async def pod_log(request: web.Request, ctx: ApiContext, info: RequestInfo) -> web.StreamResponse:
    target = locate(ctx, info, request.query.get("container", ""), what="read logs from")
    quote = urllib.parse.quote
    path = f"/containerLogs/{quote(info.namespace)}/{quote(info.name)}/{quote(target.container)}"
    url = target.base_url + path
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S)
    connector = aiohttp.TCPConnector(ssl=target.dialer.ssl)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        try:
            upstream = await session.get(url, params=_query(request))
        except (aiohttp.ClientError, OSError) as exc:
            raise upstream_error(url, exc) from None
        async with upstream:
            if upstream.status != 200:
                raise agent_error(upstream.status, await upstream.text())
            response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response
