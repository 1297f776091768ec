"""The store: revisions, optimistic concurrency, durable writes and the watch cache, together.

Flow of a write (all on the event loop until the await, so check-then-write is atomic):
`latest()` returns the newest state of a key, including writes still being committed, the
caller computes the new object, `write()` gives it the next revision, serializes it and queues
it to the SQLite writer; the returned future resolves once the row is COMMITted and the
watch cache shows it. Reads (`get`, lists, watches) see only committed state, as etcd's do.

Start-up replays the log into the watch cache: the live objects, and as history the rows
after the last compaction, so a watcher can resume from its resourceVersion after a restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from apiserver.storage.cache import Entry, Event, WatchCache
from apiserver.storage.log import ADDED, DELETED, MODIFIED, Record, SQLiteLog

log = logging.getLogger(__name__)

Indexer = Callable[[Mapping[str, Any]], dict[str, str]]
_TYPES = {"ADDED": ADDED, "MODIFIED": MODIFIED, "DELETED": DELETED}
_NAMES = {v: k for k, v in _TYPES.items()}
COMPACT_EVERY = 5000  # committed records between compactions


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def dumps(obj: Any) -> bytes:
    """The object's JSON. orjson refuses nesting past 255 levels, which kube stores (opaque DRA parameters
    300 deep, say): those go through the standard library's encoder instead."""
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class Store:
    def __init__(self, db_path: Path, indexers: Mapping[str, Indexer], history_size: int = 10000) -> None:
        self.log = SQLiteLog(db_path)
        self.cache = WatchCache(history_size)
        self._indexers = indexers
        self._next_rev = 1
        self._pending: dict[tuple[str, str, str], Entry | None] = {}
        self._pending_rev: dict[tuple[str, str, str], int] = {}
        self._waiting: dict[int, tuple[Event, asyncio.Future[Entry]]] = {}
        self._outbox: list[Record] = []
        self._since_compaction = 0
        self._compacted = 0

    # -- start-up ----------------------------------------------------------------------------------------

    def load(self) -> None:
        """Replay the log into the watch cache (before serving)."""
        self._compacted = self.log.compacted_revision()
        cache = self.cache
        count = 0
        for record in self.log.rows():
            resource, namespace, name = record.key.split("/", 2)
            obj = orjson.loads(record.value)
            entry = self._entry(resource, namespace, name, record.rev, record.value, obj)
            prev = cache.get(resource, namespace, name)
            cache.apply(Event(_NAMES[record.type], entry, prev), 0.0)
            count += 1
        # History only reaches back to the compaction point (older rows are gone).
        cache.history_start = max(cache.history_start, self._compacted)
        self._next_rev = cache.revision + 1
        log.info(
            "loaded %d log rows, revision %d, history from %d", count, cache.revision, cache.history_start
        )

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.log.start(loop, self._committed)

    def close(self) -> None:
        self.log.close()

    @property
    def broken(self) -> BaseException | None:
        return self.log.broken

    # -- reads -------------------------------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> Entry | None:
        return self.cache.get(resource, namespace, name)

    def latest(self, resource: str, namespace: str, name: str) -> Entry | None:
        """The newest state, including writes not yet committed (for conflict checks)."""
        key = (resource, namespace, name)
        if key in self._pending:
            return self._pending[key]
        return self.cache.get(resource, namespace, name)

    @property
    def revision(self) -> int:
        return self.cache.revision

    # -- writes ------------------------------------------------------------------------------------------

    def _entry(
        self, resource: str, namespace: str, name: str, rev: int, data: bytes, obj: Mapping[str, Any]
    ) -> Entry:
        indexer = self._indexers.get(resource)
        fields = indexer(obj) if indexer else {}
        fields["metadata.name"] = name
        fields["metadata.namespace"] = namespace
        return Entry(resource, namespace, name, rev, data, _labels(obj), fields)

    def write(
        self, resource: str, namespace: str, name: str, obj: dict[str, Any], event_type: str
    ) -> asyncio.Future[Entry]:
        """Queue one change (obj: the new state, or the last state for DELETED); sets its resourceVersion."""
        if self.log.broken is not None:
            raise self.log.broken
        rev = self._next_rev
        self._next_rev += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(rev)
        data = dumps(obj)
        entry = self._entry(resource, namespace, name, rev, data, obj)
        key = (resource, namespace, name)
        prev = self.latest(resource, namespace, name)
        self._pending[key] = None if event_type == "DELETED" else entry
        self._pending_rev[key] = rev
        future: asyncio.Future[Entry] = asyncio.get_running_loop().create_future()
        self._waiting[rev] = (Event(event_type, entry, prev), future)
        # One frame to the writer per event-loop iteration rather than one per write: fewer pipe
        # writes, and the writer sees whole batches.
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.append(Record(rev, f"{resource}/{namespace}/{name}", _TYPES[event_type], data))
        return future

    def _flush(self) -> None:
        records, self._outbox = self._outbox, []
        self.log.submit(records)

    def _committed(self, batch: Sequence[Record], error: BaseException | None) -> None:
        now = time.monotonic()
        for record in batch:
            event, future = self._waiting.pop(record.rev)
            entry = event.entry
            key = (entry.resource, entry.namespace, entry.name)
            if self._pending_rev.get(key) == record.rev:
                del self._pending_rev[key]
                del self._pending[key]
            if error is not None:
                if not future.done():
                    future.set_exception(error)
                continue
            self.cache.apply(event, now)
            if not future.done():
                future.set_result(entry)
        if error is None:
            self._since_compaction += len(batch)
            if self._since_compaction >= COMPACT_EVERY and self.cache.history_start > self._compacted:
                self._since_compaction = 0
                self._compacted = self.cache.history_start
                self.log.compact(self._compacted)
