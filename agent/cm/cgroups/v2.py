"""cgroup v2 (unified): one hierarchy, driven through its interface files.

Creating a cgroup enables the controllers it needs in each ancestor's cgroup.subtree_control
(those the ancestor offers in cgroup.controllers), as runc's fs2 does. Shares become cpu.weight
with the kubelet's linear conversion. mkdir and rmdir go through a `Cgroup2Kernel`, so tests can
run against a plain directory tree with a double that creates the files the kernel would.
Files are only ever written, never created. An empty cpuset inherits the parent's CPUs, but
the kernel refuses to empty the cpuset of a populated cgroup (ENOSPC), so a pod that leaves its
own CPUs gets the parent's effective CPUs written out instead (found on a real v2 kernel).

What a new pod costs is kept to the writes: an ancestor whose controllers this backend has enabled (or
seen enabled) is not read again until it is removed, and a cgroup `create` has just made is taken to hold
the kernel's defaults (`NEW_CGROUP_VALUES`) instead of being read before its limits are written.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Protocol

from agent.cm.cgroups import validate
from agent.cm.cgroups.api import CgroupError, ResourceConfig
from agent.cm.cgroups.backend import Dirs, cgroup_path
from agent.cm.cgroups.files import (
    kernel_errors,
    read_file,
    read_flat_key,
    remove_tree,
    subdirectories,
    tree_pids,
    write_file,
)
from agent.cm.cgroups.formulas import QUOTA_PERIOD, shares_to_weight
from kubenode.cpuset import format_cpuset, parse_cpuset

WANTED_CONTROLLERS = ("cpu", "cpuset", "memory", "pids")
MAX = "max"
# What a new cgroup's limit files hold (kernel: CGROUP_WEIGHT_DFL, no quota with the default 100 ms period,
# no memory or pids limit, an empty cpuset that follows the parent's).
NEW_CGROUP_VALUES = {
    "cpu.weight": "100",
    "cpu.max": f"{MAX} {QUOTA_PERIOD}",
    "memory.max": MAX,
    "pids.max": MAX,
    "cpuset.cpus": "",
    "cpuset.mems": "",
}


class Cgroup2Kernel(Protocol):
    def mkdir(self, path: str) -> None: ...

    def rmdir(self, path: str) -> None: ...


class RealKernel:
    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)


def _cpu_max(quota: int | None, period: int | None) -> str:
    limit = MAX if validate.is_unlimited(quota) else str(quota)
    return f"{limit} {period or QUOTA_PERIOD}"


class V2Hierarchies:
    version = 2

    def __init__(self, mount_root: Path, kernel: Cgroup2Kernel | None = None) -> None:
        self._mount = os.fspath(mount_root)
        self._kernel = kernel or RealKernel()
        if not os.path.isfile(os.path.join(self._mount, "cgroup.controllers")):
            raise CgroupError(self._mount, "cgroup.controllers", "not a cgroup2 mount")
        # Cgroups whose subtree_control has every wanted controller the parent offers (until removed).
        self._enabled: set[Dirs] = set()
        # Cgroups create() made and write() has not written yet: their files hold NEW_CGROUP_VALUES. Calls
        # for one cgroup come from one thread (its pod's worker), as for the v1 backend's.
        self._fresh: set[Dirs] = set()
        self._known_lock = threading.Lock()  # pod workers create and remove cgroups in parallel

    def _path(self, dirs: Dirs) -> str:
        return os.path.join(self._mount, *dirs)

    def exists(self, dirs: Dirs) -> bool:
        return os.path.isdir(self._path(dirs))

    def exists_anywhere(self, dirs: Dirs) -> bool:
        return self.exists(dirs)

    def _enable_controllers(self, dirs: Dirs) -> None:
        if dirs in self._enabled:
            return
        directory = self._path(dirs)
        offered = set(read_file(directory, "cgroup.controllers").split())
        enabled = {word.lstrip("+") for word in read_file(directory, "cgroup.subtree_control").split()}
        missing = [name for name in WANTED_CONTROLLERS if name in offered and name not in enabled]
        if missing:
            write_file(directory, "cgroup.subtree_control", " ".join("+" + name for name in missing))
        with self._known_lock:
            self._enabled.add(dirs)

    def _forget(self, dirs: Dirs) -> None:
        """`dirs` and what is below it are gone: what was known of them is dropped."""
        depth = len(dirs)
        with self._known_lock:
            self._enabled = {known for known in self._enabled if known[:depth] != dirs}
            self._fresh = {known for known in self._fresh if known[:depth] != dirs}

    def create(self, dirs: Dirs) -> bool:
        created = self._make(dirs)
        if created:
            with self._known_lock:
                self._fresh.add(dirs)
        return created

    def _make(self, dirs: Dirs) -> bool:
        """mkdir `dirs` below a parent whose controllers are enabled; True if it was made. A parent seen
        before is not looked at again (a pod below its tiers: one call), one not seen is made if missing
        and its subtree_control completed first, as the kernel wants before a child may use them."""
        if not dirs:
            return False
        parent = dirs[:-1]
        if parent not in self._enabled:
            self._make_parent(parent)
        path = self._path(dirs)
        try:
            self._kernel.mkdir(path)
        except FileExistsError:
            return False
        except FileNotFoundError:
            self._forget(parent)  # removed behind our back since it was seen: made again, once
            self._make_parent(parent)
            with kernel_errors(cgroup_path(dirs), "(mkdir)"):
                self._kernel.mkdir(path)
        except OSError as err:
            with kernel_errors(cgroup_path(dirs), "(mkdir)"):
                raise err
        if dirs in self._enabled:  # a cgroup of that name was removed behind our back: this one is new
            with self._known_lock:
                self._enabled.discard(dirs)
        return True

    def _make_parent(self, parent: Dirs) -> None:
        self._make(parent)
        self._enable_controllers(parent)

    def validate(self, dirs: Dirs, config: ResourceConfig) -> None:
        cgroup = cgroup_path(dirs)
        validate.check_shares(cgroup, "cpu.weight", config.cpu_shares)
        validate.check_quota_period(cgroup, "cpu.max", config.cpu_quota, config.cpu_period)
        validate.check_memory(cgroup, "memory.max", config.memory_limit)
        validate.check_pids(cgroup, "pids.max", config.pids_limit)
        self._wanted_cpuset(dirs, config)

    def _wanted_cpuset(self, dirs: Dirs, config: ResourceConfig) -> tuple[str, str]:
        """cpuset.cpus and cpuset.mems to hold; empty means inherit the parent's (v2 needs no copying)."""
        cgroup = cgroup_path(dirs)
        parent = self._path(dirs[:-1])
        wanted = []
        for file, value in (("cpuset.cpus", config.cpuset_cpus), ("cpuset.mems", config.cpuset_mems)):
            if value is None:
                wanted.append("")
                continue
            effective = parse_cpuset(read_file(parent, file + ".effective"))
            wanted.append(format_cpuset(validate.checked_cpuset(cgroup, file, value, effective)))
        return wanted[0], wanted[1]

    def write(self, dirs: Dirs, config: ResourceConfig) -> None:
        directory = self._path(dirs)
        with self._known_lock:
            fresh = dirs in self._fresh
            self._fresh.discard(dirs)

        def read(file: str) -> str:
            return NEW_CGROUP_VALUES[file] if fresh else read_file(directory, file)

        wanted: dict[str, str] = {}
        if config.cpu_shares is not None:
            wanted["cpu.weight"] = str(shares_to_weight(config.cpu_shares))
        period = config.cpu_period or int(read("cpu.max").split()[1])
        wanted["cpu.max"] = _cpu_max(config.cpu_quota, period)
        wanted["memory.max"] = MAX if validate.is_unlimited(config.memory_limit) else str(config.memory_limit)
        wanted["pids.max"] = MAX if validate.is_unlimited(config.pids_limit) else str(config.pids_limit)
        wanted["cpuset.cpus"], wanted["cpuset.mems"] = self._wanted_cpuset(dirs, config)
        current = {file: read(file) for file in wanted}
        for file in ("cpuset.cpus", "cpuset.mems"):
            if current[file] and not wanted[file]:
                # The kernel refuses to empty the cpuset of a populated cgroup (ENOSPC), so a pod
                # that leaves its own CPUs for "the parent's" gets the parent's CPUs spelled out.
                wanted[file] = read_file(self._path(dirs[:-1]), file + ".effective")
        for file, value in wanted.items():
            if current[file] != value:
                # An empty cpuset (inherit the parent's) is written as a bare newline.
                write_file(directory, file, value or "\n")

    def fit_children_cpusets(self, dirs: Dirs, cpus: str | None, *, before: bool) -> None:
        """Nothing: a v2 child's cpuset is empty (it follows its parent's effective one)."""

    def procs_files(self, dirs: Dirs) -> list[str]:
        return [os.path.join(self._path(dirs), "cgroup.procs")]

    def pids(self, dirs: Dirs) -> set[int]:
        return tree_pids(self._path(dirs))

    def remove(self, dirs: Dirs) -> None:
        self._forget(dirs)
        remove_tree(self._path(dirs), self._kernel.rmdir)

    def remove_if_empty(self, dirs: Dirs) -> None:
        with contextlib.suppress(OSError):  # still holds pods or tasks, or already gone
            self._kernel.rmdir(self._path(dirs))
            self._forget(dirs)

    def children(self, dirs: Dirs) -> set[str]:
        return subdirectories(self._path(dirs))

    def read_limits(self, dirs: Dirs) -> dict[str, str]:
        directory = self._path(dirs)
        names = ("cpu.weight", "cpu.max", "memory.max", "pids.max", "cpuset.cpus", "cpuset.cpus.effective")
        limits = {name: read_file(directory, name) for name in names}
        quota, period = limits["cpu.max"].split()
        limits["cpu_quota"] = quota
        limits["cpu_period"] = period
        limits["cpu_weight"] = limits["cpu.weight"]
        limits["memory_limit"] = limits["memory.max"]
        limits["pids_limit"] = limits["pids.max"]
        limits["cpuset"] = limits["cpuset.cpus.effective"]
        return limits

    def memory_working_set(self, dirs: Dirs) -> int:
        path = self._path(dirs)
        usage = int(read_file(path, "memory.current"))
        return max(0, usage - read_flat_key(path, "memory.stat", "inactive_file"))

    def oom_kills(self, dirs: Dirs) -> int:
        # memory.events counts this cgroup and its descendants (memory.events.local would not).
        return read_flat_key(self._path(dirs), "memory.events", "oom_kill")

    def cpu_usage_ns(self, dirs: Dirs) -> int:
        for line in read_file(self._path(dirs), "cpu.stat").splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) * 1000
        raise CgroupError(cgroup_path(dirs), "cpu.stat", "no usage_usec line")
