"""Which cgroup version the host runs, decided as the kubelet (runc's IsCgroup2UnifiedMode) does."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

from agent.cm.cgroups.api import CgroupError
from agent.util.libc import LIBC

CGROUP_MOUNT = Path("/sys/fs/cgroup")
CGROUP2_SUPER_MAGIC = 0x63677270
_STATFS_BUFFER = 256  # larger than struct statfs on every Linux ABI; f_type is its first word


def filesystem_magic(path: Path) -> int:
    """statfs(path).f_type; os.statvfs does not expose it, so call libc."""
    buffer = ctypes.create_string_buffer(_STATFS_BUFFER)
    if LIBC.statfs(os.fsencode(path), buffer) != 0:
        errno = ctypes.get_errno()
        raise CgroupError(str(path), "", f"statfs failed: {os.strerror(errno)}")
    return ctypes.c_long.from_buffer(buffer).value & 0xFFFFFFFF


def detect_version(mount_root: Path) -> int:
    """2 if mount_root is itself a cgroup2 mount (unified); 1 otherwise, hybrid hosts included."""
    return 2 if filesystem_magic(mount_root) == CGROUP2_SUPER_MAGIC else 1
