"""Watch streams: chunked, one JSON event per line, as kube's cacher serves them.

Flow: parse the options, register a `Watcher` with the cache and take the starting events in
the same synchronous step (so no change can slip between them): the current state as ADDED
(no resourceVersion, "0", or sendInitialEvents=true, which then ends with the BOOKMARK annotated
`k8s.io/initial-events-end`), or the window's events after resourceVersion (an older one gets
the in-band ERROR 410 `Expired`). Then forward what the watcher buffers, with a BOOKMARK every
`bookmark_interval` on an idle stream when asked and one 2 s before the end, until timeoutSeconds (else a
random 30-60 min).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from apiserver import protoencode, protoschema
from apiserver.handlers.common import (
    METRICS,
    ApiContext,
    list_filter,
    metadata_requested,
    partial_object,
    query_bool,
    query_int,
    query_resource_version,
    table_requested,
    to_table,
)
from apiserver.registry import Strategy
from apiserver.selectors import Requirement, Selector
from apiserver.status import api_error, bad_request
from apiserver.storage.cache import Watcher

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
WRITE_TIMEOUT = 30.0  # a client that takes no bytes for this long is disconnected
# Below this much buffered output a write returns without waiting (aiohttp's drain limit).
WRITE_BUFFER = 1 << 16
DIRECT_BUFFER = 8 << 20  # a direct watcher whose client leaves this much unread is closed
# kube's cacher sends a watch that allows bookmarks one BOOKMARK this long before its timeoutSeconds end.
FINAL_BOOKMARK_LEAD = 2.0


def bookmark_line(strategy: Strategy, revision: int, *, initial_end: bool = False) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    obj = {"kind": strategy.info.kind, "apiVersion": strategy.info.group_version, "metadata": meta}
    return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"


def expired_line(requested: int, oldest: int) -> bytes:
    status = api_error(410, "Expired", f"too old resource version: {requested} ({oldest})")
    return orjson.dumps({"type": "ERROR", "object": status}) + b"\n"


async def serve(
    request: web.Request, ctx: ApiContext, strategy: Strategy, namespace: str, name: str
) -> web.StreamResponse:
    resource = strategy.info
    filter_ = list_filter(request, strategy, namespace)
    if name:
        filter_.fields = Selector((*filter_.fields.requirements, Requirement("metadata.name", "=", (name,))))
    rv_text = request.query.get("resourceVersion", "")
    send_initial_raw = request.query.get("sendInitialEvents")
    send_initial = query_bool(request, "sendInitialEvents")
    bookmarks = query_bool(request, "allowWatchBookmarks")
    if send_initial and request.query.get("resourceVersionMatch", "NotOlderThan") != "NotOlderThan":
        raise bad_request("sendInitialEvents requires resourceVersionMatch=NotOlderThan")
    timeout = query_int(request, "timeoutSeconds")
    duration = float(timeout) if timeout and timeout > 0 else ctx.min_request_timeout * (1 + random.random())
    requested = query_resource_version(request)
    if table_requested(request):
        request["watch_mode"] = "table"
    elif metadata_requested(request):
        request["watch_mode"] = "partial"
    elif protoencode.wants_protobuf(request.headers.get("Accept", "")) and protoschema.message_for(
        resource.group_version, resource.kind
    ):
        request["watch_mode"] = "protobuf"  # length-delimited WatchEvent frames, as Go clients ask
    table = "watch_mode" in request or "convert" in request  # events transformed one by one

    # -- synchronous: register and take the starting events together --
    cache = ctx.store.cache
    watcher = Watcher(resource.plural, filter_)
    first: list[bytes] = []
    initial = send_initial or (rv_text in ("", "0") and send_initial_raw is None)
    if initial:
        cache.add_watcher(watcher)
        first.extend(
            b'{"type":"ADDED","object":' + e.data + b"}\n" for e in cache.entries(resource.plural, filter_)
        )
        if send_initial:
            first.append(bookmark_line(strategy, cache.revision, initial_end=True))
    else:
        events = cache.since(resource.plural, requested)
        if events is None:
            first.append(expired_line(requested, cache.history_start))
        else:
            cache.add_watcher(watcher)
            watcher.limit += len(events)
            now = time.monotonic()
            for event in events:
                watcher.offer(event, now)
            watcher.limit -= len(events)

    media = protoencode.WATCH_MEDIA_TYPE if request.get("watch_mode") == "protobuf" else "application/json"
    response = web.StreamResponse(headers={"Content-Type": media, "Cache-Control": "no-cache"})
    response.enable_chunked_encoding()
    try:
        await response.prepare(request)
        if first:
            await _send(response, first, table, request, strategy)
        if events_expired(first, initial):
            return response
        await _forward(request, response, ctx, strategy, watcher, duration, bookmarks, table)
    except TimeoutError:
        watcher.overflowed = True  # no bytes taken for WRITE_TIMEOUT
    except ConnectionResetError:
        pass
    finally:
        cache.remove_watcher(watcher)
    if watcher.overflowed and request.transport is not None:
        # A client this far behind is cut off, as kube closes a watcher that cannot keep up; what was
        # buffered for it goes with the connection. It re-watches from the last resourceVersion it read.
        request.transport.abort()
        return response
    with contextlib.suppress(ConnectionResetError, RuntimeError):
        await response.write_eof()
    return response


def events_expired(first: list[bytes], initial: bool) -> bool:
    return not initial and len(first) == 1 and first[0].startswith(b'{"type":"ERROR"')


def next_bookmark_at(now: float, interval: float, deadline: float, final_sent: bool) -> float:
    """When an idle watch that allows bookmarks gets its next BOOKMARK: every `interval` (kube's cacher: a
    minute), and once FINAL_BOOKMARK_LEAD before its deadline (timeoutSeconds) so a client that re-watches
    resumes from the latest revision; after that one, none until the deadline."""
    periodic = now + interval
    final = deadline - FINAL_BOOKMARK_LEAD
    if final_sent or final >= periodic:
        return periodic if periodic < deadline else math.inf
    return max(final, now)


async def _forward(
    request: web.Request,
    response: web.StreamResponse,
    ctx: ApiContext,
    strategy: Strategy,
    watcher: Watcher,
    duration: float,
    bookmarks: bool,
    table: bool,
) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + duration
    final_sent = False
    next_bookmark = math.inf
    if bookmarks:
        next_bookmark = next_bookmark_at(start, ctx.bookmark_interval, deadline, final_sent)
    if not table:
        watcher.go_direct(_direct_sink(request, strategy))
    # One timer wakes the stream for its deadline or next bookmark; events wake it through the same
    # asyncio.Event. (wait_for per wake-up cost more than the write itself with 100 watchers.) The timer is
    # armed again whenever it has fired: a loop's timer may fire a little before loop.time() reaches its
    # time (uvloop rounds to milliseconds), and a stream left with no timer would never wake again.
    timer: asyncio.TimerHandle | None = None

    def arm() -> None:
        nonlocal timer
        due = min(deadline, next_bookmark)

        def fire() -> None:
            nonlocal timer
            timer = None
            watcher.wakeup.set()

        timer = loop.call_at(due, fire)

    arm()
    try:
        while not watcher.closed:
            if not watcher.pending:
                watcher.wakeup.clear()
                await watcher.wakeup.wait()
            now = loop.time()
            if watcher.pending:
                lines = [line for line, _, _ in watcher.pending]
                watcher.pending.clear()
                await _send(response, lines, table, request, strategy)
                if METRICS is not None:
                    info = strategy.info
                    METRICS.watch_event(info.group, info.version, info.kind, len(lines))
            if now >= deadline or watcher.overflowed:
                return  # timeoutSeconds; or too slow: the client re-watches from its last resourceVersion
            if now >= next_bookmark:
                # Every event up to the cache's revision was offered to this watcher (and is written
                # before the bookmark): none is skipped.
                watcher.flush()
                line = bookmark_line(strategy, ctx.store.cache.revision)
                await _send(response, [line], table, request, strategy)  # a protobuf stream frames it too
                final_sent = final_sent or deadline - loop.time() <= FINAL_BOOKMARK_LEAD
                next_bookmark = next_bookmark_at(loop.time(), ctx.bookmark_interval, deadline, final_sent)
                if timer is not None:
                    timer.cancel()
                    timer = None
            if timer is None:
                arm()
    finally:
        if timer is not None:
            timer.cancel()


def _direct_sink(request: web.Request, strategy: Strategy) -> Callable[[bytes, int], bool]:
    """Writes chunks straight to the connection (headers went out in prepare()): no coroutine per
    watcher per event. False once the client is gone or lets DIRECT_BUFFER bytes pile up unread."""
    info = strategy.info

    def sink(data: bytes, count: int) -> bool:
        transport = request.transport
        if transport is None or transport.is_closing():
            return False
        transport.write(b"%x\r\n" % len(data) + data + b"\r\n")
        if METRICS is not None:
            METRICS.watch_event(info.group, info.version, info.kind, count)
        return transport.get_write_buffer_size() <= DIRECT_BUFFER

    return sink


async def _send(
    response: web.StreamResponse, lines: list[bytes], table: bool, request: web.Request, strategy: Strategy
) -> None:
    if table:
        lines = [_as_table(line, request, strategy) for line in lines]
    data = b"".join(lines)
    transport = request.transport
    if transport is not None and transport.get_write_buffer_size() + len(data) < WRITE_BUFFER:
        await response.write(data)  # room in the buffer: this write does not wait for the client
        return
    async with asyncio.timeout(WRITE_TIMEOUT):
        await response.write(data)


def _as_table(line: bytes, request: web.Request, strategy: Strategy) -> bytes:
    """kubectl get -w asks for Table objects in watch events too; the metadata client for
    PartialObjectMetadata."""
    event = orjson.loads(line)
    convert = request.get("convert")  # events.k8s.io/v1 Events: the core ones converted (eventsv1.py)
    if convert is not None and isinstance(event.get("object"), dict):
        if event.get("type") == "BOOKMARK":
            event["object"]["apiVersion"] = "events.k8s.io/v1"
        else:
            event["object"] = convert(event["object"])
    obj = event.get("object") or {}
    if request.get("watch_mode") == "protobuf":
        frame = protoencode.watch_frame(str(event.get("type") or ""), obj)
        return frame if frame is not None else b""
    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
        if request.get("watch_mode") == "partial":
            event["object"] = partial_object(obj)
        elif request.get("watch_mode") == "table":
            rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            event["object"] = to_table(request, strategy.info, [obj], rv)
    return orjson.dumps(event) + b"\n"
