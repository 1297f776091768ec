"""Rotating a CRI container's log as the kubelet's container log manager does: rename it, ReopenContainerLog.

A CRI runtime holds the container's log open and reopens it at its path when asked (ReopenContainerLog), so
the file can be renamed, unlike a process container's (rotation.py). `rotate_renamed`, under the log's lock
(`lock_for`, which readers take too), in the kubelet's order (container_log_manager.go rotateLog):
- leftovers are cleaned: `*.tmp` of a compression that was cut short, and a rotated file whose `.gz` exists;
- the oldest rotated files are removed until, with the one this rotation makes, at most `max_files - 1`
  are kept (the live file is one of containerLogMaxFiles);
- every rotated file kept is gzip-compressed to `<name>.gz` (written to `<name>.gz.tmp`, then renamed):
  only the one this rotation makes stays plain, so that a reader still at its end can finish it;
- `<restart>.log` is renamed to `<restart>.log.<YYYYMMDD-HHMMSS>` (`-<n>` added where a kept file is of
  the same second, so that the names still sort oldest first) and the runtime is asked to reopen it. If
  the reopen fails the rename is undone, so the runtime writes on into the file that readers read, and the
  error is raised.
`kubectl logs` reads the rotated files, then the live one (reader.py: the kubelet reads only the live one,
which is empty just after a rotation); a follower (reader.RenamedFollower) reads the renamed file to its
end, then the new one.
"""

from __future__ import annotations

import gzip
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from agent.logs.rotation import lock_for

STAMP = "%Y%m%d-%H%M%S"  # the kubelet's timestampFormat
STAMP_LENGTH = len("YYYYMMDD-HHMMSS")


def rotated_files(log: Path) -> list[Path]:
    """`<restart>.log.<stamp>[-n][.gz]` beside the live log, oldest first."""
    found = [p for p in log.parent.glob(f"{log.name}.*") if not p.name.endswith(".tmp")]
    return sorted(found, key=lambda p: _order(_suffix(log, p)))


def _suffix(log: Path, rotated: Path) -> str:
    return rotated.name.removeprefix(log.name + ".").removesuffix(".gz")


def _order(suffix: str) -> tuple[str, int]:
    """`<stamp>` before `<stamp>-1` before `<stamp>-2` (a plain sort puts `-10` before `-2`)."""
    n = suffix[STAMP_LENGTH + 1 :]
    return suffix[:STAMP_LENGTH], int(n) if n.isdigit() else 0


def _cleanup(log: Path) -> None:
    for tmp in log.parent.glob(f"{log.name}.*.tmp"):
        tmp.unlink(missing_ok=True)
    for path in rotated_files(log):
        if not path.name.endswith(".gz") and path.with_name(path.name + ".gz").exists():
            path.unlink(missing_ok=True)


def _compress(path: Path) -> None:
    target = path.with_name(path.name + ".gz")
    tmp = target.with_name(target.name + ".tmp")
    with path.open("rb") as source, gzip.open(tmp, "wb") as out:
        shutil.copyfileobj(source, out, 1024 * 1024)
    os.replace(tmp, target)
    path.unlink()


def _rotated_name(log: Path, now: float, kept: list[Path]) -> Path:
    """`<log>.<stamp>`, or `-<n>` after it, n past any kept file of the same second (so order holds)."""
    stamp = time.strftime(STAMP, time.gmtime(now))
    same = [_order(_suffix(log, p))[1] for p in kept if _suffix(log, p)[:STAMP_LENGTH] == stamp]
    if not same:
        return log.with_name(f"{log.name}.{stamp}")
    return log.with_name(f"{log.name}.{stamp}-{max(same) + 1}")


def rotate_renamed(log: Path, max_files: int, reopen: Callable[[], None], now: float | None = None) -> bool:
    """Rename the live log and have the runtime reopen it; returns whether it rotated."""
    with lock_for(log):
        if not log.exists():
            return False
        _cleanup(log)
        rotated = rotated_files(log)
        while len(rotated) > max(0, max_files - 2):
            rotated.pop(0).unlink(missing_ok=True)
        for path in rotated:
            if not path.name.endswith(".gz"):
                _compress(path)
        target = _rotated_name(log, now if now is not None else time.time(), rotated)
        os.rename(log, target)
        try:
            reopen()
        except BaseException:
            os.rename(target, log)  # the runtime still writes into it: keep it where readers look
            raise
        return True
