"""The eviction signals, observed as the kubelet computes them: (available, capacity) per signal.

- memory.available: the node's memory capacity less the working set of the root memory cgroup (usage less
  inactive file pages, as the kubelet reads it; not `free`'s figure). On cgroup v2, where the root has no
  usage file, /proc/meminfo's MemTotal less MemAvailable stands in for the working set.
- allocatableMemory.available: the pods' allocatable memory less the working set of the pods' cgroups.
- nodefs.available and nodefs.inodesFree: statvfs of the filesystem holding the agent's state directory (its
  pod records, logs and volumes: the kubelet's root dir). imagefs.* only exist with a CRI image filesystem,
  which the process runtime has not: they are not observed, so their thresholds never fire.
- pid.available: kernel.pid_max less the number of processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Observation:
    available: int
    capacity: int


def _meminfo() -> dict[str, int]:
    values = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                values[name] = int(parts[0]) * (1024 if len(parts) > 1 else 1)
    return values


def root_memory_working_set(cgroup_mount: Path = Path("/sys/fs/cgroup")) -> int:
    v1 = cgroup_mount / "memory"
    try:
        usage = int((v1 / "memory.usage_in_bytes").read_text())
        inactive = 0
        for line in (v1 / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "total_inactive_file":
                inactive = int(value)
        return max(0, usage - inactive)
    except (OSError, ValueError):
        info = _meminfo()
        return max(0, info.get("MemTotal", 0) - info.get("MemAvailable", 0))


def process_count() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return 32768


def observe(
    state_dir: Path,
    memory_capacity: int,
    allocatable_memory: int,
    pods_working_set: Callable[[], int],
    root_working_set: Callable[[], int] = root_memory_working_set,
) -> dict[str, Observation]:
    fs = os.statvfs(state_dir)
    observations = {
        "memory.available": Observation(max(0, memory_capacity - root_working_set()), memory_capacity),
        "allocatableMemory.available": Observation(
            max(0, allocatable_memory - pods_working_set()), allocatable_memory
        ),
        "nodefs.available": Observation(fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize),
        "pid.available": Observation(max(0, pid_max() - process_count()), pid_max()),
    }
    if fs.f_files:  # some filesystems (btrfs) report no inode counts
        observations["nodefs.inodesFree"] = Observation(fs.f_favail, fs.f_files)
    return observations
