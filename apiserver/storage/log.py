"""The durable log: one SQLite table of revisions, written by one thread with group commit.

Flow: the event loop assigns each write the next revision and hands a `Record` to
`SQLiteLog.submit`; the writer thread takes every record queued so far, inserts them in one
transaction, COMMITs (WAL, synchronous=FULL, so the commit is on disk), and only then calls
back into the event loop, which makes the writes visible and acknowledges them. A write is
never acknowledged before its COMMIT; concurrent writers share one fsync.

The table is an MVCC log as kine keeps one: row `rev` is the object's resourceVersion, `type`
says whether the row created, modified or deleted `key`, and `value` is the object's JSON.
Compaction (run by the same thread) deletes rows that a newer row of the same key supersedes
at or below the compaction revision, and tombstones at or below it, so the table holds the
live objects plus the recent history the watch cache replays after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED = 0, 1, 2
MAX_BATCH = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    rev INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    type INTEGER NOT NULL,
    value BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS log_key_rev ON log (key, rev);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


@dataclass(slots=True)
class Record:
    rev: int
    key: str
    type: int
    value: bytes


Committed = Callable[[Sequence[Record], BaseException | None], None]


class StorageBroken(Exception):
    """A commit failed: nothing more is written, since later revisions may depend on lost ones."""


class SQLiteLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._queue: queue.SimpleQueue[tuple[str, object] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_commit: Committed | None = None
        self.broken: BaseException | None = None
        self.commits = 0

    # -- start-up (before the writer runs) ---------------------------------------------------------------

    def compacted_revision(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE name = 'compacted'").fetchone()
        return int(row[0]) if row else 0

    def rows(self) -> Iterator[Record]:
        """Every stored row in revision order."""
        for rev, key, type_, value in self._db.execute("SELECT rev, key, type, value FROM log ORDER BY rev"):
            yield Record(rev, key, type_, value)

    # -- the writer ----------------------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop, on_commit: Committed) -> None:
        self._loop = loop
        self._on_commit = on_commit
        self._thread = threading.Thread(target=self._run, name="apiserver-sqlite-writer", daemon=True)
        self._thread.start()

    def submit(self, records: list[Record]) -> None:
        """Queue records (in revision order) for the next transaction."""
        self._queue.put(("write", records))

    def compact(self, revision: int) -> None:
        self._queue.put(("compact", revision))

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        self._db.close()

    def _run(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            batch: list[Record] = []
            compactions: list[int] = []
            while True:
                if item is None:
                    stop = True
                elif item[0] == "write":
                    batch.extend(item[1])  # type: ignore[arg-type]
                else:
                    compactions.append(item[1])  # type: ignore[arg-type]
                if stop or len(batch) >= MAX_BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._write(batch)
            for revision in compactions:
                self._compact(revision)

    def _write(self, batch: list[Record]) -> None:
        error: BaseException | None = self.broken
        if error is None:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    "INSERT INTO log (rev, key, type, value) VALUES (?, ?, ?, ?)",
                    [(r.rev, r.key, r.type, r.value) for r in batch],
                )
                self._db.execute("COMMIT")
                self.commits += 1
            except sqlite3.Error as exc:
                log.error("SQLite commit failed; refusing further writes: %s", exc)
                error = self.broken = StorageBroken(f"storage commit failed: {exc}")
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
        assert self._loop is not None and self._on_commit is not None
        # RuntimeError: the loop closed during shutdown; the rows are committed anyway.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._on_commit, batch, error)

    def _compact(self, revision: int) -> None:
        if self.broken is not None:
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
            # A row is superseded when a newer row of its key is at or below the compaction revision.
            self._db.execute(
                "DELETE FROM log WHERE rev <= ?1 AND EXISTS (SELECT 1 FROM log AS newer "
                "WHERE newer.key = log.key AND newer.rev > log.rev AND newer.rev <= ?1)",
                (revision,),
            )
            # The newest row must survive: it carries the current revision across a restart.
            self._db.execute(
                "DELETE FROM log WHERE rev <= ?1 AND type = ?2 AND rev < (SELECT MAX(rev) FROM log)",
                (revision, DELETED),
            )
            self._db.execute(
                "INSERT INTO meta (name, value) VALUES ('compacted', ?1) "
                "ON CONFLICT (name) DO UPDATE SET value = MAX(value, ?1)",
                (revision,),
            )
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            log.warning("compaction to revision %d failed: %s", revision, exc)
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
