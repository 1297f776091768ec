"""Forced removal of a whole cgroup subtree, in every v1 hierarchy or on the v2 mount.

The agent's pod cgroup manager removes what it made, pod by pod. This is the blunt tool for test
fixtures, benchmarks and `kubenode up`'s last resort, where a root must be gone entirely whatever
state a crash or a failed assertion left it in: kill every process under it, then remove the
directories bottom-up, retrying while killed tasks are still leaving. It knows no controller by
name: every hierarchy mounted under the v1 mount is swept, since runc makes a CRI pod's cgroup in
all of them (devices, freezer, blkio, systemd, ...), not only in the agent's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path

CGROUP_MOUNT = Path("/sys/fs/cgroup")  # v2's one tree is mounted here
V1_MOUNT = CGROUP_MOUNT  # and v1's hierarchies, one directory each, below it


def removed_meanwhile(err: OSError) -> bool:
    """Whether the error says the cgroup is gone: ENOENT when it went before the open, ENODEV (kernfs) when
    it went between the open and the read. Cgroups are removed while they are read (by runc, by the agent's
    own terminations); one that went is simply gone."""
    return err.errno in (errno.ENOENT, errno.ENODEV)


def v1_hierarchies(mount: Path = V1_MOUNT) -> list[Path]:
    """Every hierarchy mounted under `mount`, each once by its real path (cpu and cpuacct are one)."""
    try:
        with os.scandir(mount) as entries:
            found = {os.path.realpath(entry.path) for entry in entries if entry.is_dir()}
    except FileNotFoundError:
        return []
    return [Path(path) for path in sorted(found)]


def sweep_v1_root(
    root: str, *, mount: Path = V1_MOUNT, attempts: int = 50, retry_delay: float = 0.02
) -> list[str]:
    """SIGKILL everything under `root` in each v1 hierarchy and remove it; returns what stayed. Every
    mounted hierarchy is swept, not only the agent's controllers: runc makes a CRI pod's cgroup in all."""
    left = []
    for hierarchy in v1_hierarchies(mount):
        top = hierarchy / root.strip("/")
        if top.is_dir():
            _kill_each(top)
            left += _remove_bottom_up(top, attempts, retry_delay)
    return left


def sweep_v2_root(
    root: str, *, mount: Path = CGROUP_MOUNT, attempts: int = 100, retry_delay: float = 0.02
) -> list[str]:
    """cgroup v2: kill everything under `root` (cgroup.kill where the kernel has it) and remove it."""
    top = mount / root.strip("/")
    if not top.is_dir():
        return []
    kill_file = top / "cgroup.kill"
    if kill_file.is_file():
        kill_file.write_text("1")  # the whole subtree at once, children forked meanwhile included
    else:
        _kill_each(top)
    return _remove_bottom_up(top, attempts, retry_delay)


def _kill_each(top: Path) -> None:
    for current, _dirs, _files in os.walk(top):
        try:
            pids = Path(current, "cgroup.procs").read_text().split()
        except OSError as error:
            if removed_meanwhile(error):  # by runc, say, between the walk and the read: it holds no task
                continue
            raise
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def _remove_bottom_up(top: Path, attempts: int, retry_delay: float) -> list[str]:
    left = []
    for current, _dirs, _files in os.walk(top, topdown=False):
        for _ in range(attempts):
            try:
                os.rmdir(current)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(retry_delay)  # killed tasks take a moment to leave the cgroup
        else:
            left.append(current)
    return left
