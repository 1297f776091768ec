"""Prometheus metrics under kube-apiserver's names, and the `/metrics` route.

CORE's request middleware calls `observe_request` once per request (after the answer, with its code and
duration); the watch fan-out calls `watch_event` per event sent; storage calls `set_storage_objects` when a
count changes. The process collectors of prometheus-client add `process_resident_memory_bytes` and friends,
as Go's collectors do for kube-apiserver.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from apiserver.resources import SERVED, ResourceInfo

# kube-apiserver's request-latency buckets (staging/src/k8s.io/apiserver/pkg/endpoints/metrics).
DURATION_BUCKETS = (
    0.005,
    0.025,
    0.05,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    1.25,
    1.5,
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    15,
    20,
    30,
    45,
    60,
)

# The verb label as kube-apiserver reports it: upper-case, LIST and WATCH apart from GET.
REPORTED_VERB = {
    "get": "GET",
    "list": "LIST",
    "watch": "WATCH",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETE",
}

REQUESTS = Counter(
    "apiserver_request_total",
    "Counter of apiserver requests broken out for each verb, resource, subresource and HTTP response code.",
    ["verb", "resource", "subresource", "code"],
)
DURATION = Histogram(
    "apiserver_request_duration_seconds",
    "Response latency distribution in seconds for each verb, resource and subresource.",
    ["verb", "resource", "subresource"],
    buckets=DURATION_BUCKETS,
)


class WatchEventsCollector(Collector):
    """apiserver_watch_events_total from plain counts: watch_event runs once per event per watcher (100
    watchers make 100 calls an event), so it adds to a dict on the event loop, and only a scrape builds
    the metric; a prometheus Counter child costs ~5 us a call there."""

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str, str]] = collections.Counter()

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "apiserver_watch_events",
            "Number of events sent in watch clients",
            labels=["group", "version", "kind"],
        )
        for labels, count in list(self.counts.items()):
            family.add_metric(list(labels), count)
        yield family


WATCH_EVENTS = WatchEventsCollector()
REGISTRY.register(WATCH_EVENTS)
_REQUEST_CHILDREN: dict[tuple[str, str, str, int], tuple[Any, Any]] = {}
STORAGE_OBJECTS = Gauge(
    "apiserver_storage_objects",
    "Number of stored objects at the time of last check split by kind.",
    ["resource"],
)


def reported_verb(verb: str) -> str:
    return REPORTED_VERB.get(verb, verb.upper())


def observe_request(verb: str, resource: str, subresource: str, code: int, seconds: float) -> None:
    """`verb` is RequestInfo's (get, list, watch, create, ...) or a non-resource call's method."""
    key = (verb, resource, subresource, code)
    children = _REQUEST_CHILDREN.get(key)
    if children is None:  # labels() validates and locks each time; look each child up once
        label = reported_verb(verb)
        # A watch's duration is its lifetime; kube keeps those out of the latency SLI too.
        duration = None if label == "WATCH" else DURATION.labels(label, resource, subresource)
        children = _REQUEST_CHILDREN[key] = (
            REQUESTS.labels(label, resource, subresource, str(code)),
            duration,
        )
    children[0].inc()
    if children[1] is not None:
        children[1].observe(seconds)


def watch_event(group: str, version: str, kind: str, count: int = 1) -> None:
    WATCH_EVENTS.counts[(group, version, kind)] += count


def storage_label(resource: str) -> str:
    """kube labels by group-qualified resource: `pods`, `leases.coordination.k8s.io`."""
    if "." in resource:
        return resource
    group = next((r.group for r in SERVED if r.plural == resource), "")
    return f"{resource}.{group}" if group else resource


def set_storage_objects(resource: str, count: int) -> None:
    """`resource` is the plural (`leases`) or kube's qualified label (`leases.coordination.k8s.io`)."""
    STORAGE_OBJECTS.labels(storage_label(resource)).set(count)


def render(registry: CollectorRegistry = REGISTRY) -> bytes:
    return generate_latest(registry)


def add_routes(app: web.Application, resources: Sequence[ResourceInfo]) -> None:
    for r in resources:  # every served resource shows up, at 0 until storage reports
        STORAGE_OBJECTS.labels(storage_label(r.plural))

    async def metrics(request: web.Request) -> web.Response:
        response = web.Response(body=render())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app.router.add_get("/metrics", metrics)
