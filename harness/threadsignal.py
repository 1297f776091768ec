"""A signal to one chosen thread of a process, for tests of the stop paths (kubenode/stopsignal.py).

os.kill sends to the process and the kernel picks the thread; these name it, as the kernel does when the
main thread already has a signal pending.
"""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

_SYS_TGKILL = {"x86_64": 234, "aarch64": 131}


def tgkill(pid: int, tid: int, sig: int) -> None:
    """Send `sig` to thread `tid` of process `pid`."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_SYS_TGKILL[platform.machine()], pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tid}, {sig})")


def thread_taking(pid: int, sig: int) -> int:
    """A thread of `pid` other than the main one that does not block `sig`."""
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        blocked = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)
        if tid != pid and not blocked & (1 << (sig - 1)):
            return tid
    raise AssertionError(f"no thread of {pid} takes signal {sig}")
