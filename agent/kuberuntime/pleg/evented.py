"""The Evented PLEG (the kubelet's, KEP-3386): the runtime streams container events; the relist is a fallback.

Flow: a runtime that can stream container events has the capability `container_events`, a callable that opens
a stream (the kubelet's CRI GetContainerEvents); a host-process runtime has none and keeps the generic relist
every `relist_interval`. The runtime's side is a `ContainerEventHub`: each container start and stop is
published to every open `ContainerEventStream`. `EventedPLEG`'s thread opens a stream and hands each event to
the agent (a stopped container: its pod gets a sync, as the generic relist's ContainerDied does). While it is
in use the agent's generic relist runs only every EVENTED_RELIST_PERIOD_S (eventedPlegRelistPeriod, 300 s), a
safety net. A stream that breaks or cannot be opened counts as a failure: the PLEG relists at once (the
kubelet's forced Relist: an event may have been missed) and opens a new stream; after MAX_STREAM_RETRIES
failures (eventedPlegMaxStreamRetries; counted over the PLEG's life, as the kubelet counts them) it stops, and
`on_fallback` puts the agent back on the generic relist at its own period. A stream holds at most
STREAM_CAPACITY unread events: one its reader lets fill up breaks (the kubelet drops events from a full
channel; breaking instead makes the reader relist, so no stop is lost).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from agent.util.background import BackgroundLoop

log = logging.getLogger(__name__)

EVENTED_RELIST_PERIOD_S = 300.0  # the kubelet's eventedPlegRelistPeriod
MAX_STREAM_RETRIES = 5  # the kubelet's eventedPlegMaxStreamRetries
STREAM_CAPACITY = 1000  # the kubelet's plegChannelCapacity

# CRI's ContainerEventType values the agent's runtimes produce.
CONTAINER_STARTED = "CONTAINER_STARTED_EVENT"
CONTAINER_STOPPED = "CONTAINER_STOPPED_EVENT"


@dataclass(frozen=True)
class ContainerEvent:
    pod_uid: str
    container: str
    kind: str  # CONTAINER_STARTED or CONTAINER_STOPPED


class EventStreamError(Exception):
    """The runtime's event stream broke, or could not be opened."""


class ContainerEventStream:
    """One subscriber's events, in order; `next` blocks until one comes, the stream breaks or is closed."""

    def __init__(self, capacity: int = STREAM_CAPACITY) -> None:
        self._events: collections.deque[ContainerEvent] = collections.deque()
        self._capacity = capacity
        self._cond = threading.Condition(threading.Lock())
        self._broken = ""
        self.closed = False

    def offer(self, event: ContainerEvent) -> None:
        """The runtime's side: queue an event (a full stream breaks: its reader fell behind)."""
        with self._cond:
            if self.closed or self._broken:
                return
            if len(self._events) >= self._capacity:
                self._broken = f"{self._capacity} events unread"
                self._events.clear()
            else:
                self._events.append(event)
            self._cond.notify()

    def break_(self, reason: str) -> None:
        with self._cond:
            if not self.closed and not self._broken:
                self._broken = reason
                self._events.clear()
                self._cond.notify()

    def next(self, timeout: float | None = None) -> ContainerEvent | None:
        """The next event; None when closed or after `timeout`; EventStreamError once broken."""
        with self._cond:
            while True:
                if self._broken:
                    raise EventStreamError(self._broken)
                if self._events:
                    return self._events.popleft()
                if self.closed or not self._cond.wait(timeout):
                    return None

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._events.clear()
            self._cond.notify()


class ContainerEventHub:
    """A runtime's event stream server: every open stream gets each published event."""

    def __init__(self, capacity: int = STREAM_CAPACITY) -> None:
        self._capacity = capacity
        self._streams: list[ContainerEventStream] = []
        self._lock = threading.Lock()

    def open(self) -> ContainerEventStream:
        stream = ContainerEventStream(self._capacity)
        with self._lock:
            self._streams = [s for s in self._streams if not s.closed] + [stream]
        return stream

    def publish(self, event: ContainerEvent) -> None:
        with self._lock:
            streams = self._streams
        for stream in streams:
            stream.offer(event)

    def break_streams(self, reason: str) -> None:
        """Break every open stream (the runtime restarted, its connection dropped)."""
        with self._lock:
            streams, self._streams = self._streams, []
        for stream in streams:
            stream.break_(reason)


class EventedPLEG(BackgroundLoop):
    """Reads the runtime's container events for the agent; relists when the stream fails, gives up after
    `max_retries` failures (`in_use` is then False and `on_fallback` has been called)."""

    thread_name = "evented-pleg"

    def __init__(
        self,
        open_stream: Callable[[], ContainerEventStream],
        on_event: Callable[[ContainerEvent], None],
        relist: Callable[[], None],
        on_fallback: Callable[[], None],
        *,
        max_retries: int = MAX_STREAM_RETRIES,
    ) -> None:
        super().__init__()
        self._open = open_stream
        self._on_event = on_event
        self._relist = relist
        self._on_fallback = on_fallback
        self.max_retries = max_retries
        self.failures = 0
        self.in_use = False
        self._stream: ContainerEventStream | None = None
        self._first: ContainerEventStream | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Open the first stream before returning (no event of a pod synced from now on is missed), then
        read it in the PLEG's thread; one that cannot be opened counts as the first failure there."""
        self.in_use = True
        try:
            self._first = self._open()
        except EventStreamError as exc:
            log.info("evented PLEG: opening the container event stream: %s", exc)
        super().start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()
        super().stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.failures >= self.max_retries:
                log.warning(
                    "evented PLEG: the runtime's event stream failed %d times; back to the generic relist",
                    self.failures,
                )
                self.in_use = False
                self._on_fallback()
                return
            stream, self._first = self._first, None
            try:
                stream = stream or self._open()
            except EventStreamError as exc:
                self._failed(exc)
                continue
            with self._lock:
                self._stream = stream
            if self._stop.is_set():
                stream.close()
                return
            try:
                self._read(stream)
            except EventStreamError as exc:
                self._failed(exc)
            finally:
                stream.close()

    def _read(self, stream: ContainerEventStream) -> None:
        while not self._stop.is_set():
            event = stream.next()
            if event is None:  # closed: the PLEG is stopping
                return
            try:
                self._on_event(event)
            except Exception:  # one pod's event must not end the stream
                log.exception("evented PLEG: handling %s", event)

    def _failed(self, exc: EventStreamError) -> None:
        self.failures += 1
        log.info("evented PLEG: container events failed (%s); relisting", exc)
        try:
            self._relist()
        except Exception:
            log.exception("evented PLEG: forced relist")
