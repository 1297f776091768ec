"""EventRecorder: core/v1 Events as client-go's record package writes them, without ever blocking.

`event(ref, type, reason, message)` puts the event on a bounded queue and returns; when the
queue is full the event is dropped with a log line (client-go drops too). A thread drains
the queue (with `writers` > 1, that many threads, each taking the events whose aggregation
key hashes to it, so writes of one key stay in order while a burst is written in parallel)
and, like client-go's EventLogger:
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

from kubenode.kubeclient.client import EVENTS, KubeClient
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
        queues = self._queues
        queues[hash(self._key(item)) % len(queues) if len(queues) > 1 else 0].put(item)

    def start(self) -> None:
        for shard in self._queues:
            thread = threading.Thread(target=self._run, args=(shard,), name="event-recorder", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, flush_timeout: float = 2.0) -> None:
        """Write what is queued (for at most flush_timeout seconds), then end the thread."""
        self.flush(flush_timeout)
        self._stop.set()
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

    def _write(self, item: _Pending) -> None:
        key = self._key(item)
        now = rfc3339(item.wall)
        # Only this key's writer thread writes this key; the lock guards the shared LRU itself.
        with self._written_lock:
            seen = self._written.get(key)
        if seen is not None:
            patch = {"count": seen.count + 1, "lastTimestamp": now, "message": item.message}
            try:
                self.client.patch(EVENTS, seen.name, patch, seen.namespace, decode=False)
                with self._written_lock:
                    seen.count += 1
                    if key in self._written:
                        self._written.move_to_end(key)
                return
            except NotFound:
                with self._written_lock:
                    self._written.pop(key, None)  # expired or deleted: write a new one
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
        with contextlib.suppress(AlreadyExists):  # a retry of a create that reached the server
            self.client.create(EVENTS, body, namespace, decode=False)
        with self._written_lock:
            self._written[key] = _Written(name, namespace, 1, now)
            while len(self._written) > CACHE_SIZE:
                self._written.popitem(last=False)
