"""Group commit for pod records: files already renamed into place are fsynced together, once per round.

A record save replaces `<uid>.json` at once (temporary file, rename), so an agent started after a
SIGKILL at any point reads the newest record: a killed process loses nothing the kernel already holds.
Only power loss needs the fsyncs, and those no longer sit in each pod's sync: `GroupCommitter.add`
queues the file, and one committer thread per process fsyncs every queued file and then each of their
directories once (a round of 110 pods costs 110 file fsyncs and one directory fsync instead of 220 in
the syncs' path). The thread exists only while there is work: it ends after a round finds nothing new
within `LINGER_S`, so a thousand hollow nodes in one process share it and an idle agent holds none.

`flush()` is the barrier: it returns once everything queued before it is on disk (the agent calls it
when it stops; benchmarks call it before they stop their clocks). A failed fsync (EIO) is logged with the
file's path; the record stays as written and the next save of that pod queues it again.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

log = logging.getLogger("agent.podrecord")

LINGER_S = 0.05  # a committer waits this long for more work before it ends


class GroupCommitter:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: set[Path] = set()
        self._queued = 0  # rounds of work handed in (a counter of add() calls)
        self._durable = 0  # every add() up to this count is on disk
        self._running = False

    def add(self, path: Path) -> None:
        """Queue a file that was just renamed into place for fsync (its own and its directory's)."""
        with self._cond:
            self._pending.add(path)
            self._queued += 1
            self._cond.notify_all()
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._run, name="record-commit", daemon=True).start()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every file queued before this call is durable; False if `timeout` passed first."""
        with self._cond:
            wanted = self._queued
            return self._cond.wait_for(lambda: self._durable >= wanted, timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._pending and not self._cond.wait_for(lambda: bool(self._pending), LINGER_S):
                    self._running = False
                    return
                batch, self._pending = self._pending, set()
                covered = self._queued
            _sync_files(batch)
            with self._cond:
                self._durable = covered
                self._cond.notify_all()


def _sync_files(paths: set[Path]) -> None:
    for path in paths:
        _fsync(path, os.O_RDONLY)
    for directory in {path.parent for path in paths}:
        _fsync(directory, os.O_RDONLY | os.O_DIRECTORY)


def _fsync(path: Path, flags: int) -> None:
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return  # deleted since (the pod was removed): nothing to keep
    except OSError as exc:
        log.warning("cannot open %s to fsync it: %s", path, exc.strerror or exc)
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        log.warning("fsync of %s failed: %s", path, exc.strerror or exc)
    finally:
        os.close(fd)


COMMITTER = GroupCommitter()  # one per process: every RecordStore's files, whatever their directory
