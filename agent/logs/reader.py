"""Reading a container's log across its rotations: whole, from the end, or following it as it grows.

A container restart's output is the rotated files `<restart>.log.<time>.<first>` in order, then the live
region of `<restart>.log` (agent/logs/rotation.py says why the live region need not start at the file's
start). Every offset here is logical: a byte's place in the container's whole output, which a rotation
does not change, so a `Follower` keeps its place while the rotator moves the bytes under it.
A CRI container's rotated files are renamed ones, `<restart>.log.<time>[.gz]` (renaming.py): they are
read before the live file the same way (gzipped ones uncompressed), so `kubectl logs` shows the latest
lines even just after a rotation emptied the live file; its offsets are the live file's, and a
`RenamedFollower` (opened under the log's lock, with the snapshot) goes on from there into the next file.
"""

from __future__ import annotations

import contextlib
import gzip
import os
from pathlib import Path
from typing import BinaryIO

from agent.logs.renaming import rotated_files
from agent.logs.rotation import LogMeta, lock_for, read_meta

CHUNK = 64 * 1024


def _read_at(path: Path, offset: int, size: int | None = None) -> bytes:
    """Up to `size` bytes from `offset` (None: to the end); a gzipped rotated file is read uncompressed."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as packed:
                data = packed.read()
            return data[offset:] if size is None else data[offset : offset + size]
        with path.open("rb") as f:
            f.seek(offset)
            return f.read() if size is None else f.read(size)
    except (OSError, EOFError):
        return b""


def _rotated_sources(log: Path, meta: LogMeta) -> list[tuple[Path, int, int | None]]:
    """(file, offset, length) of the rotated output, oldest first: rotated in place (the meta file names
    them, a process container's) or renamed (a CRI container's, renaming.py; none of a process's)."""
    named = {r.name for r in meta.rotated}
    sources: list[tuple[Path, int, int | None]] = [
        (log.parent / r.name, 0, r.last - r.first) for r in meta.rotated
    ]
    sources += [(path, 0, None) for path in rotated_files(log) if path.name not in named]
    return sources


def _live_size(log: Path, meta: LogMeta) -> int:
    """The live file's size now (the end of the live region; `meta.start` where the file is gone)."""
    try:
        return log.stat().st_size
    except OSError:
        return meta.start


def _read_sources(log: Path, meta: LogMeta, live_end: int, lines: int | None) -> bytes:
    """The rotated output, then the live region up to `live_end` (a byte the runtime writes after that
    size was taken is not read, so the offset it gives stays true); with `lines`, from the end back
    only as far as needed."""
    sources = [*_rotated_sources(log, meta), (log, meta.start, max(0, live_end - meta.start))]
    if lines is None:
        return b"".join(_read_at(path, start, length) for path, start, length in sources)
    collected = b""
    for path, start, length in reversed(sources):
        collected = _read_at(path, start, length) + collected
        if collected.count(b"\n") > lines:
            break
    return collected


def read_all(log: Path, limit: int | None = None) -> bytes:
    """This restart's output still on disk, oldest first (at most `limit` bytes, from the end)."""
    data, _ = snapshot(log)
    return data[-limit:] if limit is not None else data


def tail_lines(log: Path, lines: int) -> bytes:
    """The last `lines` lines, reading back through the rotated files only as far as needed."""
    return snapshot(log, lines)[0]


def snapshot(log: Path, tail: int | None = None) -> tuple[bytes, int]:
    """What is on disk now (or its last `tail` lines) and the logical offset where it ends, so that a
    `Follower` started there neither repeats nor skips a byte. The runtime writes without the lock: the
    live file's size is taken once and both the read and the offset stop there (a size taken again after
    the read would skip the lines written in between)."""
    with lock_for(log):
        meta = read_meta(log)
        live_end = _live_size(log, meta)
        if tail is not None and tail <= 0:
            return b"", live_end + meta.collapsed
        data = _read_sources(log, meta, live_end, tail)
    if tail is not None:
        data = b"".join(data.splitlines(keepends=True)[-tail:])
    return data, live_end + meta.collapsed


class Follower:
    """Reads new output from a logical offset on, across rotations (where a rotated file was already deleted,
    it goes on from the oldest byte still kept)."""

    def __init__(self, log: Path, offset: int) -> None:
        self.log = log
        self.offset = offset

    def read(self, size: int = CHUNK) -> bytes:
        with lock_for(self.log):
            meta = read_meta(self.log)
            data = self._read_locked(meta, size)
        self.offset += len(data)
        return data

    def _read_locked(self, meta: LogMeta, size: int) -> bytes:
        if self.offset >= meta.live_first:
            return _read_at(self.log, self.offset - meta.collapsed, size)
        for rotated in meta.rotated:
            if rotated.first <= self.offset < rotated.last:
                length = min(size, rotated.last - self.offset)
                return _read_at(self.log.parent / rotated.name, self.offset - rotated.first, length)
        # Rotated out and deleted since: go on from the oldest byte kept (which the next call finds).
        self.offset = meta.rotated[0].first if meta.rotated else meta.live_first
        return self._read_locked(meta, size)

    def close(self) -> None:
        pass  # it opens the files at each read


def log_files(log: Path) -> list[Path]:
    """The files that hold this restart's output (the live one last), for cleanup and size accounting:
    those rotated in place (the meta file names them) or renamed (a CRI container's, renaming.py)."""
    meta = read_meta(log)
    named = [log.parent / r.name for r in meta.rotated]
    return [*named, *(p for p in rotated_files(log) if p not in named), log]


class RenamedFollower:
    """Follows a log that rotation renames (a CRI container's): reads the file it opened to its end, then,
    once the runtime writes into a new file at the path (so it has let go of the old one), that one."""

    def __init__(self, log: Path, offset: int) -> None:
        self.log = log
        self._file: BinaryIO | None = None
        with contextlib.suppress(OSError):  # renamed just now: the new file is read from its start
            self._file = log.open("rb")
            self._file.seek(offset)

    def read(self, size: int = CHUNK) -> bytes:
        data = self._file.read(size) if self._file is not None else b""
        if data:
            return data
        try:
            now = os.stat(self.log)
        except OSError:
            return b""  # renamed, the new file not made yet
        if self._file is not None:
            if now.st_ino == os.fstat(self._file.fileno()).st_ino or now.st_size == 0:
                return b""
            data = self._file.read(size)  # the last writes before the runtime reopened
            if data:
                return data
            self._file.close()
            self._file = None
        with contextlib.suppress(OSError):
            self._file = self.log.open("rb")
            return self._file.read(size)
        return b""

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
