"""mount(2), umount2(2) and unshare(2) through libc, and the mount table: what the volume code mounts with.

Python 3.11 has no os.mount or os.unshare, so they are called through ctypes (loaded once, in the agent,
so a forked child only calls them). `mounts_under(path)` reads /proc/self/mountinfo and returns the
mount points at or below a directory, deepest first, so they can be unmounted in order.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

from agent.util.libc import LIBC

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2
CLONE_NEWNS = 0x00020000

_libc = LIBC
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
_libc.unshare.argtypes = (ctypes.c_int,)


def _raise(what: str, path: str) -> None:
    errno = ctypes.get_errno()
    raise OSError(errno, f"{what} {path}: {os.strerror(errno)}")


def _b(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    if _libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)) != 0:
        _raise("mount", target)


def umount(target: str, flags: int = 0) -> None:
    if _libc.umount2(_b(target), flags) != 0:
        _raise("umount", target)


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        _raise("unshare", "")


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return [_unescape(line.split(" ", 5)[4]) for line in f if line.strip()]


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below `path` (as the mount table spells them), deepest first."""
    base = os.path.realpath(path)
    prefix = base.rstrip("/") + "/"
    found = {m for m in mount_points() if m == base or m.startswith(prefix)}
    return sorted(found, key=lambda m: (m.count("/"), m), reverse=True)


def unmount_all_under(path: Path) -> None:
    """Unmount everything at or below `path`, deepest first (lazily when busy: a reader keeps it until it
    closes, but the path is free at once)."""
    for point in mounts_under(path):
        for _ in range(8):  # stacked mounts on one point come off one by one
            if point not in mount_points():
                break
            try:
                umount(point)
            except OSError:
                umount(point, MNT_DETACH)
