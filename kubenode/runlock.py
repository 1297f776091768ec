"""One owner per cgroup root: an exclusive flock that `kubenode agent`, `kubenode up` and `agent drain` take.

Two agents on one cgroup root take each other's pods for orphans and kill them (each has its own pod
records), so the second must be refused, with the first one's pid. A flock is released by the kernel
when its holder dies, so a crash never leaves a stale lock; the file itself stays (removing it would race
with the next locker) and only records who holds it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

LOCK_DIR = Path("/run/kubenode")


class LockHeld(Exception):
    """Someone else holds the lock; `holder` is what they wrote into it ("<pid> <command>")."""

    def __init__(self, name: str, holder: str) -> None:
        self.name = name
        self.holder = holder
        super().__init__(f"{name} is in use by {holder or 'another process'}")


def _lock_dir() -> Path:
    with contextlib.suppress(PermissionError):
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
    if os.access(LOCK_DIR, os.W_OK):
        return LOCK_DIR
    # Not root: a per-user directory still keeps two of one user's runs apart.
    fallback = Path(tempfile.gettempdir()) / f"kubenode-locks-{os.getuid()}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    info = fallback.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        # Someone else made it first in a shared /tmp: their files could stand in for our locks.
        raise PermissionError(errno.EACCES, "not a directory of this user", str(fallback))
    return fallback


def cgroup_root_lock_name(cgroup_root: str) -> str:
    return f"cgroup root {cgroup_root}"


@contextlib.contextmanager
def hold(name: str, command: str) -> Iterator[None]:
    """Hold the lock `name` for the block; raises LockHeld at once if another process holds it."""
    path = _lock_dir() / (quote(name.replace(" ", "-"), safe="-") + ".lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockHeld(name, os.pread(fd, 200, 0).decode(errors="replace").strip()) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({command})\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock
