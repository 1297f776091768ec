"""The C library, for the system calls Python 3.11's os module does not reach.

mount, umount2, unshare and setns (mount namespaces), prctl, capget and capset (capabilities,
no_new_privs), fallocate with flags (log rotation) and statfs (the cgroup version) are called through this
one handle, loaded with errno kept so `check` can say why a call failed.
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
