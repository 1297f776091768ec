"""Rotating a container's log while its process keeps writing to it, without losing or splitting a line.

A process container writes its output straight into `<restart>.log` through an O_APPEND descriptor that
the agent cannot reopen for it (the process outlives the agent). So a rotation cannot rename the file, as
the kubelet's runtime does on ReopenContainerLog. It moves the file's head out instead:
- the complete lines from the live region's start up to the last newline are copied to
  `<restart>.log.<time>`;
- that prefix, rounded down to whole filesystem blocks, is cut from the front of the file in place with
  fallocate(FALLOC_FL_COLLAPSE_RANGE), which the kernel serializes with every append (where the filesystem
  cannot collapse, the bytes are punched out instead, so the disk space is freed and the size stays);
- the live region now starts at a line boundary a little way into the file: that offset, the bytes
  collapsed so far, and each rotated file's range are kept in `.<restart>.log.meta`, so a reader
  (agent/logs/reader.py) reads only the live region and a follower keeps its place across a rotation.
  Older rotated files beyond `max_files - 1` are removed (the live file counts as one, as the kubelet's
  containerLogMaxFiles). Readers and the rotator of one file take the same lock (`lock_for`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.util.libc import LIBC

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_FALLOC_FL_COLLAPSE_RANGE = 0x08
LIBC.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)

_locks: dict[str, threading.RLock] = {}
_locks_guard = threading.Lock()


def lock_for(path: Path) -> threading.RLock:
    with _locks_guard:
        return _locks.setdefault(str(path), threading.RLock())


def forget_lock(path: Path) -> None:
    with _locks_guard:
        _locks.pop(str(path), None)


@dataclass
class Rotated:
    name: str  # file name beside the live log
    first: int  # logical offsets of its bytes in the container's output: [first, last)
    last: int


@dataclass
class LogMeta:
    """Where the live region of `<restart>.log` starts, in the file and in the container's whole output."""

    start: int = 0  # offset in the file of the first byte not yet rotated out
    collapsed: int = 0  # bytes cut from the front so far: logical offset = file offset + collapsed
    rotated: list[Rotated] = field(default_factory=list)

    @property
    def live_first(self) -> int:
        return self.start + self.collapsed


def meta_path(log: Path) -> Path:
    return log.with_name(f".{log.name}.meta")


def read_meta(log: Path) -> LogMeta:
    try:
        data: Any = json.loads(meta_path(log).read_bytes())
        rotated = [Rotated(str(r["name"]), int(r["first"]), int(r["last"])) for r in data.get("rotated", [])]
        return LogMeta(int(data["start"]), int(data["collapsed"]), rotated)
    except (OSError, ValueError, KeyError, TypeError):
        return LogMeta()


def _write_meta(log: Path, meta: LogMeta) -> None:
    body = {
        "start": meta.start,
        "collapsed": meta.collapsed,
        "rotated": [{"name": r.name, "first": r.first, "last": r.last} for r in meta.rotated],
    }
    tmp = meta_path(log).with_name(meta_path(log).name + ".tmp")
    tmp.write_text(json.dumps(body))
    os.replace(tmp, meta_path(log))


def live_size(log: Path) -> int:
    """Bytes in the live region (what counts against containerLogMaxSize)."""
    try:
        return max(0, log.stat().st_size - read_meta(log).start)
    except OSError:
        return 0


def _fallocate(fd: int, mode: int, offset: int, length: int) -> int:
    """0, or the errno."""
    if LIBC.fallocate(fd, mode, offset, length) == 0:
        return 0
    return ctypes.get_errno()


def _last_line_end(fd: int, start: int, size: int) -> int:
    """The offset just past the last newline in [start, size), or `start` if there is none."""
    end = size
    while end > start:
        begin = max(start, end - 65536)
        found = os.pread(fd, end - begin, begin).rfind(b"\n")
        if found >= 0:
            return begin + found + 1
        end = begin
    return start


def _copy_range(fd: int, target: Path, offset: int, length: int) -> None:
    """Copy bytes in the kernel (a chatty container's interval of output can be large)."""
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o640)
    try:
        done = 0
        while done < length:
            copied = os.copy_file_range(fd, out, length - done, offset + done, done)
            if copied == 0:
                raise OSError(errno.EIO, f"short copy of {target}")
            done += copied
    finally:
        os.close(out)


def rotate(log: Path, max_files: int, now: float | None = None) -> bool:
    """Move the live region's complete lines to a rotated file; returns whether anything moved."""
    with lock_for(log):
        meta = read_meta(log)
        try:
            fd = os.open(log, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            size = os.fstat(fd).st_size
            cut = _last_line_end(fd, meta.start, size)
            if cut <= meta.start:
                return False  # no complete line yet: a line is never split
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
            name = f"{log.name}.{stamp}.{meta.live_first}"
            _copy_range(fd, log.parent / name, meta.start, cut - meta.start)
            cut -= meta.start
            meta.rotated.append(Rotated(name, meta.live_first, meta.live_first + cut))
            meta.start += cut
            block = os.fstat(fd).st_blksize or 4096
            collapse = (meta.start // block) * block
            if collapse >= size:  # the kernel refuses a range that reaches the end of the file
                collapse -= block
            outcome = _fallocate(fd, _FALLOC_FL_COLLAPSE_RANGE, 0, collapse) if collapse > 0 else errno.EINVAL
            if outcome == 0:
                meta.start -= collapse
                meta.collapsed += collapse
            elif outcome in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
                # No collapse here (tmpfs, a range too small): free the space, the size stays.
                _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, 0, meta.start)
            _write_meta(log, meta)
        finally:
            os.close(fd)
        while len(meta.rotated) > max(0, max_files - 1):
            oldest = meta.rotated.pop(0)
            (log.parent / oldest.name).unlink(missing_ok=True)
            _write_meta(log, meta)
        return True
