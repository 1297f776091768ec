"""metrics.k8s.io/v1beta1 NodeMetrics and PodMetrics (`kubectl top`), served from the nodes' resource metrics.

On a real cluster metrics-server serves this group through API aggregation; here the API server serves it
itself (apiserver/resourcemetrics.py scrapes the agents). Routes: GET `/apis/metrics.k8s.io/v1beta1/nodes`
[/{name}], `/pods` (every namespace), `/namespaces/{ns}/pods`[/{name}], with `labelSelector` matched against
the Node's or Pod's labels, as metrics-server does; a Table when kubectl asks for one (Name, CPU, Memory,
Window). Discovery lists the group (`METRICS_API` in apiserver/resources.py). The usage is metrics-server's
format: CPU in nanocores (`123456n`), memory in Ki.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web

from apiserver.handlers.common import CONTEXT, ApiContext, json_object, table_requested
from apiserver.handlers.podlogs import CONNECT_TIMEOUT_S, SIGNER_KEY
from apiserver.handlers.writes import load
from apiserver.resourcemetrics import SCRAPE_TIMEOUT_S, NodeUsage, ResourceMetrics, Usage
from apiserver.resources import ResourceInfo
from apiserver.selectors import parse_label_selector
from apiserver.status import APIError, method_not_allowed, not_found
from apiserver.storage.cache import Filter
from kubenode.nodeproxyauth import Signer, node_daemon_endpoint

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
PREFIX = f"/apis/{GROUP_VERSION}"
METRICS_KEY = "resource_metrics"  # ctx.extras: the ResourceMetrics made on first use
RESOURCE_PATH = "/metrics/resource"


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _usage(usage: Usage) -> dict[str, str]:
    return {"cpu": f"{usage.cpu_nanocores}n", "memory": f"{usage.memory_bytes // 1024}Ki"}


def _window(seconds: float) -> str:
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


def node_metrics(node: Mapping[str, Any], usage: NodeUsage) -> dict[str, Any]:
    meta = node.get("metadata") or {}
    return {
        "kind": "NodeMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": {
            "name": usage.node,
            "creationTimestamp": _time(usage.timestamp),
            "labels": dict(meta.get("labels") or {}),
        },
        "timestamp": _time(usage.timestamp),
        "window": _window(usage.window),
        "usage": _usage(usage.usage),
    }


def pod_metrics(pod: Mapping[str, Any], usage: NodeUsage) -> dict[str, Any] | None:
    meta = pod.get("metadata") or {}
    containers = usage.pods.get((meta.get("namespace", ""), meta.get("name", "")))
    if not containers:
        return None
    return {
        "kind": "PodMetrics",
        "apiVersion": GROUP_VERSION,
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "creationTimestamp": _time(usage.timestamp),
            "labels": dict(meta.get("labels") or {}),
        },
        "timestamp": _time(usage.timestamp),
        "window": _window(usage.window),
        "containers": [{"name": name, "usage": _usage(u)} for name, u in sorted(containers.items())],
    }


def _table(kind: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    columns = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": "Name of the object",
            "priority": 0,
        },
        {"name": "CPU", "type": "string", "format": "", "description": "CPU usage", "priority": 0},
        {"name": "Memory", "type": "string", "format": "", "description": "Memory usage", "priority": 0},
        {"name": "Window", "type": "string", "format": "", "description": "The sample window", "priority": 0},
    ]
    rows = []
    for item in items:
        if kind == "NodeMetrics":
            usage = item["usage"]
        else:
            cpu = sum(int(c["usage"]["cpu"].rstrip("n")) for c in item["containers"])
            memory = sum(int(c["usage"]["memory"].rstrip("Ki")) for c in item["containers"])
            usage = {"cpu": f"{cpu}n", "memory": f"{memory}Ki"}
        meta = item["metadata"]
        partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        rows.append(
            {"cells": [meta["name"], usage["cpu"], usage["memory"], item["window"]], "object": partial}
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": columns,
        "rows": rows,
    }


def _metrics(ctx: ApiContext) -> ResourceMetrics:
    metrics: ResourceMetrics | None = ctx.extras.get(METRICS_KEY)
    if metrics is None:
        signer: Signer | None = ctx.extras.get(SIGNER_KEY)

        async def scrape(node: str, address: str) -> str:
            headers = {"Authorization": f"Bearer {signer.token(node, RESOURCE_PATH)}"} if signer else {}
            timeout = aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S, sock_connect=CONNECT_TIMEOUT_S)
            url = f"http://{address}{RESOURCE_PATH}"
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url, headers=headers) as response,
            ):
                if response.status != 200:
                    raise RuntimeError(f"GET {RESOURCE_PATH}: HTTP {response.status}")
                return await response.text()

        metrics = ctx.extras[METRICS_KEY] = ResourceMetrics(scrape)
    return metrics


async def handle(request: web.Request) -> web.StreamResponse:
    info = request["info"]
    ctx: ApiContext = request.app[CONTEXT]
    if info.verb not in ("get", "list"):
        raise method_not_allowed(f"{info.verb} is not supported on {GROUP_VERSION} {info.resource}")
    if info.resource not in ("nodes", "pods") or info.subresource:
        raise APIError(404, "NotFound", "the server could not find the requested resource", {})
    selector = parse_label_selector(request.query.get("labelSelector"))
    nodes = {e.name: load(e) for e in ctx.store.cache.entries("nodes", Filter())}
    endpoints = {name: a for name, node in nodes.items() if (a := node_daemon_endpoint(node)) is not None}
    if info.resource == "nodes":
        wanted = [info.name] if info.name else sorted(endpoints)
        if info.name and info.name not in endpoints:
            raise not_found("nodemetrics", info.name, GROUP)
        usage = await _metrics(ctx).current({n: endpoints[n] for n in wanted if n in endpoints})
        items = [
            node_metrics(nodes[n], usage[n])
            for n in wanted
            if n in usage and selector.matches((nodes[n].get("metadata") or {}).get("labels") or {})
        ]
        if info.name and not items:
            raise not_found("nodemetrics", info.name, GROUP)
        kind = "NodeMetrics"
    else:
        pods = [load(e) for e in ctx.store.cache.entries("pods", Filter(info.namespace, selector))]
        if info.name:
            pods = [p for p in pods if (p.get("metadata") or {}).get("name") == info.name]
        on_nodes = {str((p.get("spec") or {}).get("nodeName") or "") for p in pods} & set(endpoints)
        usage = await _metrics(ctx).current({n: endpoints[n] for n in sorted(on_nodes)})
        items = []
        for pod in pods:
            node_usage = usage.get((pod.get("spec") or {}).get("nodeName") or "")
            metrics = pod_metrics(pod, node_usage) if node_usage is not None else None
            if metrics is not None:
                items.append(metrics)
        if info.name and not items:
            raise not_found(
                "podmetrics", f"{info.namespace}/{info.name}" if info.namespace else info.name, GROUP
            )
        kind = "PodMetrics"
    if table_requested(request):
        return json_object(_table(kind, items))
    if info.name:
        return json_object(items[0])
    return json_object({"kind": f"{kind}List", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items})


def add_routes(app: web.Application, resources: Sequence[ResourceInfo]) -> None:
    del resources  # the metrics resources are this module's own (METRICS_API in apiserver/resources.py)
    app.router.add_get(PREFIX + "/{tail:.+}", handle)
