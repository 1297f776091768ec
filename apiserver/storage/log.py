"""The durable log: the SQLite file (`sqlfile`), written by a separate writer process with group commit.

Flow: at start-up the server reads the file itself (`compacted_revision`, `rows`), then `start`
closes it and runs `python -m apiserver.storage.writer` on it. The event loop assigns each write
the next revision and `submit`s batches of `Record`s; they go to the writer through a pipe
(buffered here, never blocking the loop). The writer commits everything that has arrived in one
transaction (WAL, synchronous=FULL) and acknowledges it; only then, in the event loop, does
`on_commit` make the writes visible and answer their requests. A write is never acknowledged
before its COMMIT, and concurrent writers share one fsync. See writer.py for why a process.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import logging
import os
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from apiserver.storage import sqlfile
from apiserver.storage.sqlfile import ADDED, DELETED, MODIFIED, Record
from apiserver.storage.writer import ACK, ERROR, encode_batch, encode_compact

log = logging.getLogger(__name__)

__all__ = ["ADDED", "DELETED", "MODIFIED", "Committed", "Record", "SQLiteLog", "StorageBroken"]

Committed = Callable[[Sequence[Record], BaseException | None], None]
_HEADER = struct.Struct(">cI")
PIPE_SIZE = 1 << 20
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class StorageBroken(Exception):
    """A commit failed (or the writer died): nothing more is written, since later revisions may depend
    on lost ones."""


class SQLiteLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlfile.open_db(path)
        self._process: subprocess.Popen[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_commit: Committed | None = None
        self._inflight: collections.deque[list[Record]] = collections.deque()
        self._outgoing = bytearray()
        self._incoming = bytearray()
        self.broken: BaseException | None = None
        self.commits = 0

    # -- start-up (before the writer runs) ---------------------------------------------------------------

    def compacted_revision(self) -> int:
        return sqlfile.compacted_revision(self._db)

    def rows(self) -> Iterator[Record]:
        return sqlfile.rows(self._db)

    # -- the writer ----------------------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop, on_commit: Committed) -> None:
        self._db.close()
        self._loop = loop
        self._on_commit = on_commit
        self._process = subprocess.Popen(
            [sys.executable, "-m", "apiserver.storage.writer", str(self.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        for pipe in (self._process.stdin, self._process.stdout):
            with contextlib.suppress(OSError):
                fcntl.fcntl(pipe.fileno(), F_SETPIPE_SZ, PIPE_SIZE)
            os.set_blocking(pipe.fileno(), False)
        loop.add_reader(self._process.stdout.fileno(), self._read_acks)

    def submit(self, records: list[Record]) -> None:
        """Send records (in revision order) for the next transaction."""
        if self.broken is not None:
            assert self._on_commit is not None
            self._on_commit(records, self.broken)
            return
        self._inflight.append(records)
        self._write(encode_batch(records))

    def compact(self, revision: int) -> None:
        if self.broken is None:
            self._write(encode_compact(revision))

    def _write(self, frame: bytes) -> None:
        assert self._process is not None and self._process.stdin is not None and self._loop is not None
        fd = self._process.stdin.fileno()
        if self._outgoing:  # earlier bytes still wait for room in the pipe: keep the order
            self._outgoing += frame
            return
        try:
            written = os.write(fd, frame)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._fail(StorageBroken(f"storage writer gone: {exc}"))
            return
        if written < len(frame):
            self._outgoing += frame[written:]
            self._loop.add_writer(fd, self._drain)

    def _drain(self) -> None:
        assert self._process is not None and self._process.stdin is not None and self._loop is not None
        fd = self._process.stdin.fileno()
        try:
            written = os.write(fd, self._outgoing)
        except BlockingIOError:
            return
        except OSError as exc:
            self._loop.remove_writer(fd)
            self._fail(StorageBroken(f"storage writer gone: {exc}"))
            return
        del self._outgoing[:written]
        if not self._outgoing:
            self._loop.remove_writer(fd)

    def _read_acks(self) -> None:
        assert self._process is not None and self._process.stdout is not None and self._on_commit is not None
        try:
            data = os.read(self._process.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            return
        if not data:
            self._fail(StorageBroken(f"storage writer exited with {self._process.poll()}"))
            return
        self._incoming += data
        while len(self._incoming) >= _HEADER.size:
            kind, count = _HEADER.unpack_from(self._incoming)
            if kind == ACK:
                del self._incoming[: _HEADER.size]
                for _ in range(count):
                    self.commits += 1
                    self._on_commit(self._inflight.popleft(), None)
            elif kind == ERROR:
                if len(self._incoming) < _HEADER.size + count:
                    return
                message = self._incoming[_HEADER.size : _HEADER.size + count].decode(errors="replace")
                self._fail(StorageBroken(f"storage commit failed: {message}"))
                return
            else:
                self._fail(StorageBroken(f"storage writer sent an unknown frame {kind!r}"))
                return

    def _fail(self, error: StorageBroken) -> None:
        if self.broken is None:
            log.error("%s; refusing further writes", error)
            self.broken = error
        assert self._loop is not None and self._process is not None and self._process.stdout is not None
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(self._process.stdout.fileno())
        assert self._on_commit is not None
        while self._inflight:
            self._on_commit(self._inflight.popleft(), self.broken)

    def close(self, timeout: float = 30.0) -> None:
        """Let the writer commit what was sent, then stop it (blocking; for shutdown)."""
        process = self._process
        if process is None:
            self._db.close()
            return
        assert process.stdin is not None and process.stdout is not None
        if self._loop is not None:
            with contextlib.suppress(ValueError, OSError, RuntimeError):
                self._loop.remove_reader(process.stdout.fileno())
                self._loop.remove_writer(process.stdin.fileno())
        os.set_blocking(process.stdin.fileno(), True)
        with contextlib.suppress(OSError):
            if self._outgoing:
                process.stdin.write(bytes(self._outgoing))
            process.stdin.close()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
        self._process = None
