"""The watch cache: every live object in memory, a bounded window of events, and the watchers.

Each object is held as its serialized JSON (`Entry.data`) plus the labels and selectable
fields that selectors read, so a list is a filter over dicts and a join of bytes, and a
watch event is one pre-built line shared by every watcher. Watchers are indexed by the field
their selector pins (`watchindex`), so a pod event costs the same whatever the number of node
watchers it does not concern. Only committed writes enter
(`apply`, called by the store after COMMIT, in revision order).

Watchers get events through bounded per-watcher buffers filled without awaiting: a watcher
whose buffer overflows is closed (it re-watches from its last resourceVersion), so a slow
client never blocks writers or other watchers. A watch from a revision older than the
window gets the in-band 410 `Expired` error, as kube's cacher sends it.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from apiserver.selectors import EVERYTHING, Selector
from apiserver.storage.watchindex import WatcherSet

WATCHER_BUFFER = 2000  # events a watcher may lag behind before it is closed


@dataclass(slots=True)
class Entry:
    resource: str
    namespace: str
    name: str
    rev: int
    data: bytes  # the object's JSON, metadata.resourceVersion included
    labels: dict[str, str]
    fields: dict[str, str]


@dataclass(slots=True)
class Event:
    type: str  # ADDED | MODIFIED | DELETED
    entry: Entry
    prev: Entry | None  # the state before (MODIFIED/DELETED), to filter on selector transitions
    _lines: dict[str, bytes] = field(default_factory=dict)

    @property
    def rev(self) -> int:
        return self.entry.rev

    def line(self, event_type: str | None = None) -> bytes:
        """The newline-terminated watch line, built once and shared by all watchers."""
        kind = event_type or self.type
        line = self._lines.get(kind)
        if line is None:
            line = self._lines[kind] = (
                b'{"type":"' + kind.encode() + b'","object":' + self.entry.data + b"}\n"
            )
        return line


@dataclass
class Filter:
    namespace: str = ""
    labels: Selector = EVERYTHING
    fields: Selector = EVERYTHING

    def matches(self, entry: Entry) -> bool:
        if self.namespace and entry.namespace != self.namespace:
            return False
        return self.labels.matches(entry.labels) and self.fields.matches(entry.fields)


Sink = Callable[[bytes, int], bool]  # (lines, how many) -> False when the client is too far behind


class Flusher:
    """Sends what direct watchers were offered, once per event-loop iteration: one write per watcher
    for a whole committed batch, without waking a coroutine per watcher."""

    def __init__(self) -> None:
        self.dirty: set[Watcher] = set()
        self.scheduled = False

    def mark(self, watcher: Watcher) -> None:
        self.dirty.add(watcher)
        if not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self.scheduled = False
        dirty, self.dirty = self.dirty, set()
        for watcher in dirty:
            watcher.flush()


FLUSHER = Flusher()


class Watcher:
    """One watch request's buffer. With a `sink` (direct mode) the Flusher hands it the lines; without
    one, the handler drains `pending` after `wakeup` fires (Table output, the initial events)."""

    def __init__(self, resource: str, filter_: Filter, limit: int = WATCHER_BUFFER) -> None:
        self.resource = resource
        self.filter = filter_
        self.limit = limit
        self.pending: deque[tuple[bytes, int, float]] = deque()  # (line, rev, enqueue monotonic time)
        self.wakeup = asyncio.Event()
        self.overflowed = False
        self.closed = False
        self.sink: Sink | None = None

    def go_direct(self, sink: Sink) -> None:
        """From now on, lines go to `sink` at the end of each event-loop iteration (and what waits now)."""
        self.sink = sink
        self.flush()

    def flush(self) -> None:
        if self.sink is None or not self.pending or self.closed:
            return
        count = len(self.pending)
        data = b"".join(line for line, _, _ in self.pending)
        self.pending.clear()
        if not self.sink(data, count):
            self.overflowed = True
            self.closed = True
            self.wakeup.set()

    def offer(self, event: Event, now: float) -> None:
        if self.closed:
            return
        matches_now = self.filter.matches(event.entry)
        if event.type == "ADDED":
            kind = "ADDED" if matches_now else ""
        else:
            matched_before = event.prev is not None and self.filter.matches(event.prev)
            if event.type == "DELETED":
                kind = "DELETED" if matched_before else ""
            elif matches_now:
                kind = "MODIFIED" if matched_before else "ADDED"
            else:
                kind = "DELETED" if matched_before else ""
        if not kind:
            return
        if len(self.pending) >= self.limit:
            self.overflowed = True
            self.closed = True
        else:
            self.pending.append((event.line(kind), event.rev, now))
            if self.sink is not None:
                FLUSHER.mark(self)
                return
        self.wakeup.set()


class WatchCache:
    def __init__(self, history_size: int) -> None:
        self.revision = 0  # last committed revision
        self.objects: dict[str, dict[str, dict[str, Entry]]] = {}  # resource -> namespace -> name -> entry
        self.history: deque[Event] = deque(maxlen=history_size)
        self.history_start = 0  # a watch from any revision >= this one can be served from history
        self.watchers: dict[str, WatcherSet] = {}  # resource -> its watchers, indexed by pinned field
        # (resource, namespace) -> its names in order, until a name comes or goes: each page of a
        # chunked list (kubectl's limit=500) starts where the last ended instead of sorting again
        self._sorted_names: dict[tuple[str, str], list[str]] = {}

    # -- state ------------------------------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> Entry | None:
        return self.objects.get(resource, {}).get(namespace, {}).get(name)

    def count(self, resource: str) -> int:
        return sum(len(names) for names in self.objects.get(resource, {}).values())

    def entries(
        self, resource: str, filter_: Filter, after: tuple[str, str] | None = None
    ) -> Iterator[Entry]:
        """Matching entries in key order (namespace, name), starting after `after`."""
        spaces = self.objects.get(resource, {})
        namespaces = [filter_.namespace] if filter_.namespace else sorted(spaces)
        for namespace in namespaces:
            if after is not None and namespace < after[0]:
                continue
            names = spaces.get(namespace)
            if not names:
                continue
            ordered = self._sorted_names.get((resource, namespace))
            if ordered is None:
                ordered = self._sorted_names[(resource, namespace)] = sorted(names)
            start = (
                bisect.bisect_right(ordered, after[1]) if after is not None and namespace == after[0] else 0
            )
            for index in range(start, len(ordered)):
                entry = names.get(ordered[index])
                if entry is None:  # deleted while a caller paused between entries
                    continue
                if filter_.labels.matches(entry.labels) and filter_.fields.matches(entry.fields):
                    yield entry

    def apply(self, event: Event, now: float) -> None:
        """Make one committed change visible and hand it to the watchers."""
        entry = event.entry
        spaces = self.objects.setdefault(entry.resource, {})
        if event.type == "DELETED":
            names = spaces.get(entry.namespace, {})
            names.pop(entry.name, None)
            self._sorted_names.pop((entry.resource, entry.namespace), None)
            if not names:
                spaces.pop(entry.namespace, None)
        else:
            names = spaces.setdefault(entry.namespace, {})
            if entry.name not in names:
                self._sorted_names.pop((entry.resource, entry.namespace), None)
            names[entry.name] = entry
        self.revision = entry.rev
        if len(self.history) == self.history.maxlen and self.history:
            self.history_start = self.history[0].rev
        self.history.append(event)
        watchers = self.watchers.get(entry.resource)
        if watchers is not None:
            for watcher in watchers.candidates(event):
                watcher.offer(event, now)

    # -- watchers ---------------------------------------------------------------------------------------

    def add_watcher(self, watcher: Watcher) -> None:
        self.watchers.setdefault(watcher.resource, WatcherSet()).add(watcher)

    def remove_watcher(self, watcher: Watcher) -> None:
        watcher.closed = True
        watchers = self.watchers.get(watcher.resource)
        if watchers is not None:
            watchers.discard(watcher)

    def close_all(self) -> None:
        """End every watch (shutdown): their handlers see `closed` and finish their responses."""
        for watchers in self.watchers.values():
            for watcher in watchers:
                watcher.closed = True
                watcher.wakeup.set()

    def since(self, resource: str, revision: int) -> list[Event] | None:
        """Events of `resource` after `revision`, or None when the window no longer reaches back."""
        if revision < self.history_start:
            return None
        if not self.history or self.history[-1].rev <= revision:
            return []
        result = []
        for event in reversed(self.history):
            if event.rev <= revision:
                break
            if event.entry.resource == resource:
                result.append(event)
        result.reverse()
        return result
