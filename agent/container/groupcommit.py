"""Group commit for pod records: files already renamed into place are fsynced together, once per round.

A record save replaces `<uid>.json` at once (temporary file, rename), so an agent started after a
SIGKILL at any point reads the newest record: a killed process loses nothing the kernel already holds.
Only power loss needs the fsyncs, and those no longer sit in each pod's sync: `GroupCommitter.add`
queues the file, and one committer thread per process starts the writeback of every queued file, then
fsyncs each and each of their directories once: on ext4 the first fsync's journal commit covers the
whole round, so 110 pods cost about one commit instead of 220 fsyncs in the syncs' path. The thread
exists only while there is work: it ends after a round finds nothing new within `LINGER_S`, so a
thousand hollow nodes in one process share it and an idle agent holds none.

A round starts once no file has been queued for `QUIET_S`, or `GATHER_MAX_S` after its first file,
or at once when someone flushes: each round's fsyncs are journal commits, and while one runs every new
file (the next pod's record) waits to be created, so a burst of syncs (110 pods from cold) that fed
back-to-back rounds paid for both (a record's create took ~1 ms instead of ~0.1); gathered, the burst's
records are committed together after it. Nothing but `flush` waits for a round, so the only cost is that
a record reaches the disk up to `GATHER_MAX_S` later (power loss only: a SIGKILL loses nothing either way).

`flush()` is the barrier: it returns once everything queued before it is on disk (the agent calls it
when it stops; benchmarks call it before they stop their clocks). A failed fsync (EIO) is logged with the
file's path; the record stays as written and the next save of that pod queues it again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path

from agent.util.libc import start_writeback

log = logging.getLogger("agent.podrecord")

LINGER_S = 0.05  # a committer waits this long for more work before it ends
QUIET_S = 0.02  # a round starts when no file has been queued for this long (a burst has ended) ...
GATHER_MAX_S = 0.25  # ... or this long after its first file, or at once when a flush waits
MAX_OPEN = 256  # files held open at once by a round


class GroupCommitter:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: set[Path] = set()
        self._queued = 0  # rounds of work handed in (a counter of add() calls)
        self._durable = 0  # every add() up to this count is on disk
        self._running = False
        self._flushing = 0  # flush() calls waiting: the round being gathered starts at once
        self._last_add = 0.0  # time.monotonic() of the last add()
        self._gathering = False

    def add(self, path: Path) -> None:
        """Queue a file that was just renamed into place for fsync (its own and its directory's)."""
        with self._cond:
            self._pending.add(path)
            self._queued += 1
            self._last_add = time.monotonic()
            if not self._gathering:  # a gathering committer looks at _last_add when its wait ends
                self._cond.notify_all()
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._run, name="record-commit", daemon=True).start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every file queued before this call is durable; False if `timeout` passed first."""
        with self._cond:
            wanted = self._queued
            self._flushing += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: self._durable >= wanted, timeout)
            finally:
                self._flushing -= 1

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._pending and not self._cond.wait_for(lambda: bool(self._pending), LINGER_S):
                    self._running = False
                    return
                self._gather()
                batch, self._pending = self._pending, set()
                covered = self._queued
            _sync_files(batch)
            with self._cond:
                self._durable = covered
                self._cond.notify_all()

    def _gather(self) -> None:
        """Wait (holding the condition) until the burst feeding this round has ended, or it is due."""
        due = time.monotonic() + GATHER_MAX_S
        self._gathering = True
        try:
            while self._flushing == 0:
                wait = min(due, self._last_add + QUIET_S) - time.monotonic()
                if wait <= 0:
                    return
                self._cond.wait(wait)  # a flush() wakes it; then the times are looked at again
        finally:
            self._gathering = False


def _sync_files(paths: set[Path]) -> None:
    ordered = sorted(paths)
    for start in range(0, len(ordered), MAX_OPEN):
        _sync_chunk(ordered[start : start + MAX_OPEN])
    for directory in {path.parent for path in paths}:
        fd = _open(directory, os.O_RDONLY | os.O_DIRECTORY)
        if fd is not None:
            _fsync(directory, fd)


def _sync_chunk(paths: list[Path]) -> None:
    """Start every file's writeback first, then fsync each: the first fsync's journal commit then covers
    the others' block allocations too (ext4), so a round costs about one commit, not one per file."""
    opened = [(path, fd) for path in paths if (fd := _open(path, os.O_RDONLY)) is not None]
    try:
        for _, fd in opened:
            with contextlib.suppress(OSError):  # only a hint: the fsync below reports real errors
                start_writeback(fd)
        for path, fd in opened:
            _fsync(path, fd)
    finally:
        for _, fd in opened:
            os.close(fd)


def _open(path: Path, flags: int) -> int | None:
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        return None  # deleted since (the pod was removed): nothing to keep
    except OSError as exc:
        log.warning("cannot open %s to fsync it: %s", path, exc.strerror or exc)
        return None


def _fsync(path: Path, fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        log.warning("fsync of %s failed: %s", path, exc.strerror or exc)


COMMITTER = GroupCommitter()  # one per process: every RecordStore's files, whatever their directory
