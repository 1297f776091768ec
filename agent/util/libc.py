"""The C library, for the system calls Python 3.11's os module does not reach.

mount, umount2, unshare and setns (mount namespaces), prctl, capget and capset (capabilities,
no_new_privs), fallocate with flags (log rotation), statfs (the cgroup version) and sync_file_range
(pod records' group commit) are called through this one handle, loaded with errno kept so `check` can
say why a call failed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def check(result: int, what: str) -> None:
    """Raise OSError with the call's errno when `result` says it failed (anything but 0)."""
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


SYNC_FILE_RANGE_WRITE = 2  # start writeback of the range's dirty pages; do not wait

LIBC.sync_file_range.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)


def start_writeback(fd: int) -> None:
    """Start writing the file's dirty pages without waiting (a hint: only an fsync makes them durable)."""
    check(LIBC.sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE), "sync_file_range")
