"""A container's own view of the root filesystem, for readOnlyRootFilesystem on a process pod.

A process pod has no image: its root is the host's. `read_only_root` runs in the child between fork and
exec: it gives the process a mount namespace of its own with private propagation (nothing it mounts
reaches the host, and the host's later mounts do not reach it), then remounts `/` read-only in that
namespace alone. Mounts below `/` (the pod's volumes, /proc, /dev, tmpfs) keep their own modes, as a
container's volume mounts do. The host's view is unchanged. mount(2) and unshare(2) are reached through
libc: Python 3.11's os has neither.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_CLONE_NEWNS = 0x00020000
_MS_RDONLY = 1
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def private_mount_namespace() -> None:
    """Enter a new mount namespace whose mounts propagate nowhere."""
    _check(_libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")


def read_only_root() -> None:
    """Remount `/` read-only in the current (private) mount namespace."""
    _check(
        _libc.mount(b"none", b"/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None),
        "remounting / read-only",
    )
