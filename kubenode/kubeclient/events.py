"""EventRecorder: core/v1 Events as client-go's record package writes them, without ever blocking.

`event(ref, type, reason, message)` puts the event on a bounded queue and returns; when the
queue is full the event is dropped with a log line (client-go drops too). A thread drains
the queue (with `writers` > 1, that many threads, each taking the events whose aggregation
key hashes to it, so writes of one key stay in order while a burst is written in parallel);
or, `asynchronous`, no thread: each event is sent at once with `KubeClient.request_async`,
ahead of the client's other waiting requests, so events do not trail the work they report
(the key's later events wait for its earlier one), its answer handled on the client's
reactor thread. Either way, like client-go's EventLogger:
- an event with the same source, involvedObject, type, reason and message as one already
  written is not created again: the existing Event gets a strategic-merge PATCH raising
  `count` and setting `lastTimestamp` (if that Event is gone, 404, a new one is created);
- a new Event is named `<object name>.<hex nanoseconds>` and lives in the object's
  namespace, or `default` for a cluster-scoped object (a Node);
- a write that fails for want of a server (transport error, 429, 5xx) is retried, up to
  `max_retries` times, `retry_interval` apart (client-go: 12 times, 10 s apart); one the
  server refuses is dropped with a log line.
client-go's second stage (merging similar events with different messages into one
"combined from similar events") is not done.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubenode.kubeclient.client import EVENTS, PATCH_TYPES, KubeClient
from kubenode.kubeclient.errors import AlreadyExists, KubeError, NotFound, is_retryable
from kubenode.kubeclient.timefmt import rfc3339

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
QUEUE_SIZE = 1000
CACHE_SIZE = 4096  # client-go's maxLruCacheEntries
MAX_RETRIES = 12
RETRY_INTERVAL_S = 10.0


@dataclass(frozen=True)
class ObjectReference:
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"
    field_path: str = ""
    resource_version: str = ""

    def to_json(self) -> dict[str, str]:
        ref = {"kind": self.kind, "name": self.name, "apiVersion": self.api_version}
        for key, value in (
            ("namespace", self.namespace),
            ("uid", self.uid),
            ("fieldPath", self.field_path),
            ("resourceVersion", self.resource_version),
        ):
            if value:
                ref[key] = value
        return ref


def reference_to(obj: Mapping[str, Any], *, field_path: str = "") -> ObjectReference:
    """An ObjectReference to an API object (dict)."""
    meta = obj.get("metadata") or {}
    return ObjectReference(
        kind=str(obj.get("kind") or ""),
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        uid=str(meta.get("uid") or ""),
        api_version=str(obj.get("apiVersion") or "v1"),
        field_path=field_path,
    )


@dataclass(frozen=True)
class _Pending:
    ref: ObjectReference
    type: str
    reason: str
    message: str
    wall: float


@dataclass
class _Written:
    name: str
    namespace: str
    count: int
    first: str


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        component: str,
        host: str = "",
        *,
        queue_size: int = QUEUE_SIZE,
        max_retries: int = MAX_RETRIES,
        retry_interval: float = RETRY_INTERVAL_S,
        wall: Callable[[], float] = time.time,
        writers: int = 1,
        asynchronous: bool = False,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host
        self.max_retries = max_retries
        self.retry_interval = retry_interval
        self._wall = wall
        # One queue per writer thread; together they hold at most queue_size events (counted in _busy).
        self.queue_size = queue_size
        self._queues: list[queue.SimpleQueue[_Pending | None]] = [
            queue.SimpleQueue() for _ in range(max(1, writers))
        ]
        self._written: collections.OrderedDict[tuple[str, ...], _Written] = collections.OrderedDict()
        self._written_lock = threading.Lock()
        self._stop = threading.Event()
        self._idle = threading.Condition()
        self._busy = 0
        self.dropped = 0
        self.written = 0
        self._threads: list[threading.Thread] = []
        # asynchronous: no writer threads; each event is sent with client.request_async and its
        # answer handled on the client's reactor thread. Events of one key wait here while an
        # earlier one of that key is in flight, so they are still written in order.
        self.asynchronous = asynchronous
        self._in_flight: dict[tuple[str, ...], collections.deque[_Pending]] = {}

    # ----- the caller's side -----------------------------------------------------------------------

    def event(self, ref: ObjectReference, type: str, reason: str, message: str) -> None:
        """Queue one event; never blocks (a full queue drops it)."""
        with self._idle:
            full = self._busy >= self.queue_size
            if full:
                self.dropped += 1
            else:
                self._busy += 1
        if full:
            log.warning("event queue full; dropping %s %s for %s", type, reason, ref.name)
            return
        item = _Pending(ref, type, reason, message, self._wall())
        if self.asynchronous:
            key = self._key(item)
            with self._idle:
                later = self._in_flight.get(key)
                if later is None:
                    self._in_flight[key] = collections.deque()
                else:
                    later.append(item)  # written when the one in flight is done
            if later is None:
                self._send(item, key, 0)
            return
        queues = self._queues
        queues[hash(self._key(item)) % len(queues) if len(queues) > 1 else 0].put(item)

    def start(self) -> None:
        if self.asynchronous:
            return
        for shard in self._queues:
            thread = threading.Thread(target=self._run, args=(shard,), name="event-recorder", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, flush_timeout: float = 2.0) -> None:
        """Write what is queued (for at most flush_timeout seconds), then end the thread."""
        self.flush(flush_timeout)
        self._stop.set()
        if self.asynchronous:
            return
        for shard in self._queues:
            shard.put(None)
        for thread in self._threads:
            thread.join(5)

    def flush(self, timeout: float) -> bool:
        """Wait until every queued event has been written (or given up on)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    # ----- the writer thread -----------------------------------------------------------------------

    def _run(self, shard: queue.SimpleQueue[_Pending | None]) -> None:
        while not self._stop.is_set():
            item = shard.get()
            if item is None:
                return
            try:
                self._write_with_retries(item)
            except Exception:  # a bug drops this event, not the recorder
                log.exception("writing event %s %s", item.type, item.reason)
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _write_with_retries(self, item: _Pending) -> None:
        for attempt in range(self.max_retries + 1):
            try:
                self._write(item)
                self.written += 1
                return
            except KubeError as exc:
                if not is_retryable(exc) or attempt == self.max_retries:
                    log.warning("dropping event %s %s for %s: %s", item.type, item.reason, item.ref.name, exc)
                    return
                if self._stop.wait(self.retry_interval):
                    return

    def _key(self, item: _Pending) -> tuple[str, ...]:
        ref = item.ref
        return (
            self.component,
            self.host,
            ref.kind,
            ref.namespace,
            ref.name,
            ref.uid,
            ref.api_version,
            ref.field_path,
            item.type,
            item.reason,
            item.message,
        )

    def _patch_body(self, seen: _Written, item: _Pending) -> dict[str, Any]:
        return {"count": seen.count + 1, "lastTimestamp": rfc3339(item.wall), "message": item.message}

    def _patched(self, key: tuple[str, ...], seen: _Written) -> None:
        with self._written_lock:
            seen.count += 1
            if key in self._written:
                self._written.move_to_end(key)

    def _new_event(self, item: _Pending) -> tuple[str, str, dict[str, Any]]:
        """(namespace, name, body) of a new Event for the item."""
        now = rfc3339(item.wall)
        namespace = item.ref.namespace or "default"
        name = f"{item.ref.name}.{int(item.wall * 1e9):x}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": item.ref.to_json(),
            "reason": item.reason,
            "message": item.message,
            "type": item.type,
            "source": {"component": self.component, **({"host": self.host} if self.host else {})},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
        return namespace, name, body

    def _created(self, key: tuple[str, ...], namespace: str, name: str, item: _Pending) -> None:
        with self._written_lock:
            self._written[key] = _Written(name, namespace, 1, rfc3339(item.wall))
            while len(self._written) > CACHE_SIZE:
                self._written.popitem(last=False)

    def _write(self, item: _Pending) -> None:
        key = self._key(item)
        # Only this key's writer thread writes this key; the lock guards the shared LRU itself.
        with self._written_lock:
            seen = self._written.get(key)
        if seen is not None:
            try:
                patch = self._patch_body(seen, item)
                self.client.patch(EVENTS, seen.name, patch, seen.namespace, decode=False)
                self._patched(key, seen)
                return
            except NotFound:
                with self._written_lock:
                    self._written.pop(key, None)  # expired or deleted: write a new one
        namespace, name, body = self._new_event(item)
        with contextlib.suppress(AlreadyExists):  # a retry of a create that reached the server
            self.client.create(EVENTS, body, namespace, decode=False)
        self._created(key, namespace, name, item)

    # ----- asynchronous: the same steps on the client's reactor --------------------------------------

    def _send(self, item: _Pending, key: tuple[str, ...], attempt: int) -> None:
        """Write the item (a PATCH of the Event already written for its key, else a create)."""
        if self._stop.is_set() and attempt:
            self._done(key, written=False)  # a retry after stop: give up
            return
        with self._written_lock:
            seen = self._written.get(key)
        try:
            if seen is not None:
                patch = self._patch_body(seen, item)

                def patched(_: Any, error: KubeError | None) -> None:
                    if isinstance(error, NotFound):
                        with self._written_lock:
                            self._written.pop(key, None)  # expired or deleted: write a new one
                        self._send(item, key, attempt)
                    elif error is None:
                        self._patched(key, seen)
                        self._done(key, written=True)
                    else:
                        self._failed(item, key, attempt, error)

                path = EVENTS.path(seen.namespace, seen.name)
                strategic = PATCH_TYPES["strategic"]
                self.client.request_async(
                    "PATCH", path, patched, body=patch, content_type=strategic, decode=False, ahead=True
                )
                return
            namespace, name, body = self._new_event(item)

            def created(_: Any, error: KubeError | None) -> None:
                if error is None or isinstance(error, AlreadyExists):  # AlreadyExists: a retry's
                    self._created(key, namespace, name, item)
                    self._done(key, written=True)
                else:
                    self._failed(item, key, attempt, error)

            self.client.request_async(
                "POST", EVENTS.path(namespace), created, body=body, decode=False, ahead=True
            )
        except Exception:  # a bug drops this event, not the recorder
            log.exception("writing event %s %s", item.type, item.reason)
            self._done(key, written=False)

    def _failed(self, item: _Pending, key: tuple[str, ...], attempt: int, error: KubeError) -> None:
        if not is_retryable(error) or attempt >= self.max_retries or self._stop.is_set():
            log.warning("dropping event %s %s for %s: %s", item.type, item.reason, item.ref.name, error)
            self._done(key, written=False)
            return
        timer = threading.Timer(self.retry_interval, self._send, (item, key, attempt + 1))
        timer.daemon = True
        timer.start()

    def _done(self, key: tuple[str, ...], *, written: bool) -> None:
        """One event of the key is written (or given up): send the key's next, if one waits."""
        with self._idle:
            if written:
                self.written += 1
            self._busy -= 1
            self._idle.notify_all()
            later = self._in_flight.get(key)
            following = later.popleft() if later else None
            if following is None:
                self._in_flight.pop(key, None)
        if following is not None:
            self._send(following, key, 0)
