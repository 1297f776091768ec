"""GET pods/{name}/log: proxied to the node's daemon endpoint, as kube-apiserver's LogREST does.

the pod (404) -> its node (400 "does not have a host assigned" while unbound) -> the container (the
only one, or ?container=; 400 naming the choices) -> the Node's address (status.addresses: InternalIP,
then Hostname) and daemonEndpoints.kubeletEndpoint.Port -> GET
http://<address>:<port>/containerLogs/<ns>/<pod>/<container>?follow&previous&tailLines&sinceSeconds&
timestamps&limitBytes, carrying a token signed with this server's CA key (kubenode/nodeproxyauth.py),
-> the agent's answer streamed back as text/plain (a followed log chunk by chunk); the agent's error
text becomes a Status with its code.
"""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from apiserver.handlers.common import ApiContext
from apiserver.handlers.writes import load
from apiserver.request import RequestInfo
from apiserver.status import APIError, bad_request, not_found
from kubenode.nodeproxyauth import Signer, node_daemon_endpoint

SIGNER_KEY = "node_proxy_signer"  # ctx.extras: the Signer made from <data-dir>/pki/ca.key at start
PASSED_PARAMS = ("follow", "previous", "tailLines", "sinceSeconds", "timestamps", "limitBytes")
CONNECT_TIMEOUT_S = 10.0


def _container(pod: dict[str, Any], name: str, requested: str | None) -> str:
    spec = pod.get("spec") or {}
    containers = [c.get("name") for c in spec.get("containers") or []]
    init = [c.get("name") for c in spec.get("initContainers") or []]
    if requested:
        if requested not in containers and requested not in init:
            raise bad_request(f"container {requested} is not valid for pod {name}")
        return requested
    if len(containers) == 1:
        return str(containers[0])
    choices = " ".join(str(c) for c in containers)
    raise bad_request(f"a container name must be specified for pod {name}, choose one of: [{choices}]")


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
    entry = ctx.store.get("pods", info.namespace, info.name)
    if entry is None:
        raise not_found("pods", info.name)
    pod = load(entry)
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        raise bad_request(f"pod {info.name} does not have a host assigned")
    container = _container(pod, info.name, request.query.get("container"))
    node_entry = ctx.store.get("nodes", "", node_name)
    address = node_daemon_endpoint(load(node_entry)) if node_entry is not None else None
    if address is None:
        raise bad_request(f"node {node_name} reports no daemon endpoint to read logs from")
    signer: Signer | None = ctx.extras.get(SIGNER_KEY)
    if signer is None:
        raise APIError(503, "ServiceUnavailable", "this server has no CA key to authenticate to nodes")
    quote = urllib.parse.quote
    path = f"/containerLogs/{quote(info.namespace)}/{quote(info.name)}/{quote(container)}"
    headers = {"Authorization": f"Bearer {signer.token(node_name, path)}"}
    url = f"http://{address}{path}"
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            upstream = await session.get(url, params=_query(request), headers=headers)
        except (aiohttp.ClientError, OSError) as exc:
            raise APIError(
                500, "InternalError", f'Get "{url}": {exc}', {"causes": [{"message": str(exc)}]}
            ) from None
        async with upstream:
            if upstream.status != 200:
                text = (await upstream.text()).strip()
                code = upstream.status if upstream.status in (400, 404) else 500
                raise APIError(
                    code,
                    "BadRequest" if code == 400 else "NotFound" if code == 404 else "InternalError",
                    text,
                )
            response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response
