"""cgroup v1: one hierarchy per controller (cpu, cpuacct, cpuset, memory, pids), driven through cgroupspy.

cgroupspy's Tree lists the whole hierarchy when built, far too slow per operation, so this
builds one `cgroupspy.nodes.Node` per path it touches, named by the whole path below the
controller root (a chain of one Node per level costs more in path joins than the syscalls).
cgroupspy has no pids controller, so pids.max is written as a plain file. Quirks handled here:
IntegerFile maps -1 to None; cpuset files take sets of ints, not list strings; delete_cgroup
needs a str name.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from cgroupspy.nodes import Node

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
from agent.cm.cgroups.formulas import QUOTA_PERIOD
from kubenode.cpuset import format_cpuset, parse_cpuset

REQUIRED = ("cpu", "cpuacct", "cpuset", "memory")
OPTIONAL = ("pids",)
# memory.limit_in_bytes reads back as 9223372036854771712 (page-rounded LONG_MAX) when unlimited.
_MEMORY_UNLIMITED_FROM = 1 << 62


class V1Hierarchies:
    version = 1

    def __init__(self, mount_root: Path) -> None:
        self._root = Node(os.fsencode(mount_root))
        self._controllers: list[str] = []
        missing = []
        for name in REQUIRED + OPTIONAL:
            if (mount_root / name).is_dir():
                self._controllers.append(name)
            elif name in REQUIRED:
                missing.append(name)
        if missing:
            raise CgroupError(str(mount_root), "", f"cgroup v1 controllers not mounted: {', '.join(missing)}")
        # Co-mounted controllers (cpu,cpuacct) share one directory: list each directory once.
        self._distinct: dict[str, str] = {}
        for name in self._controllers:
            self._distinct.setdefault(os.path.realpath(mount_root / name), name)
        self._mount_root = mount_root

    def _node(self, controller: str, dirs: Dirs) -> Any:
        # Fresh nodes every time: a Node remembers the children it created and refuses to
        # create one again, which would break re-creating a root that was removed.
        root = Node(controller.encode(), parent=self._root)
        return Node("/".join(dirs).encode(), parent=root) if dirs else root

    def _path(self, controller: str, dirs: Dirs) -> str:
        return os.fsdecode(self._node(controller, dirs).full_path)

    def _hierarchy_paths(self, dirs: Dirs) -> list[str]:
        return [self._path(name, dirs) for name in self._distinct.values()]

    def exists(self, dirs: Dirs) -> bool:
        return all(os.path.isdir(path) for path in self._hierarchy_paths(dirs))

    def exists_anywhere(self, dirs: Dirs) -> bool:
        return any(os.path.isdir(path) for path in self._hierarchy_paths(dirs))

    def create(self, dirs: Dirs) -> bool:
        created = False
        for name in self._distinct.values():
            created = self._make(name, dirs) or created
        return created

    def _make(self, controller: str, dirs: Dirs) -> bool:
        """mkdir dirs (and missing ancestors) in one hierarchy; True if the leaf was made."""
        if not dirs or os.path.isdir(self._path(controller, dirs)):
            return False
        self._make(controller, dirs[:-1])
        with kernel_errors(cgroup_path(dirs), f"({controller} mkdir)"):
            child = self._node(controller, dirs[:-1]).create_cgroup(dirs[-1])
        if controller == "cpuset":
            self._inherit_cpuset(child, cgroup_path(dirs))
        return True

    def _inherit_cpuset(self, node: Any, cgroup: str) -> None:
        # A new v1 cpuset child starts with no cpus/mems and refuses tasks (ENOSPC) until given some.
        parent = node.parent.controller
        with kernel_errors(cgroup, "cpuset.mems"):
            node.controller.mems = parent.mems
        with kernel_errors(cgroup, "cpuset.cpus"):
            node.controller.cpus = parent.cpus

    def validate(self, dirs: Dirs, config: ResourceConfig) -> None:
        cgroup = cgroup_path(dirs)
        validate.check_shares(cgroup, "cpu.shares", config.cpu_shares)
        validate.check_quota_period(cgroup, "cpu.cfs_quota_us", config.cpu_quota, config.cpu_period)
        validate.check_memory(cgroup, "memory.limit_in_bytes", config.memory_limit)
        validate.check_pids(cgroup, "pids.max", config.pids_limit)
        if not validate.is_unlimited(config.cpu_quota):
            parent = self._node("cpu", dirs[:-1]).controller
            with kernel_errors(cgroup_path(dirs[:-1]), "cpu.cfs_quota_us"):
                parent_quota, parent_period = parent.cfs_quota_us, parent.cfs_period_us
            validate.check_quota_within_parent(
                cgroup,
                "cpu.cfs_quota_us",
                config.cpu_quota,
                config.cpu_period or QUOTA_PERIOD,
                parent_quota,
                parent_period,
            )
        if config.pids_limit is not None and config.pids_limit > 0 and "pids" not in self._controllers:
            raise CgroupError(cgroup, "pids.max", "the pids controller is not mounted")
        self._wanted_cpuset(dirs, config)

    def _wanted_cpuset(self, dirs: Dirs, config: ResourceConfig) -> tuple[set[int], set[int]]:
        cgroup = cgroup_path(dirs)
        parent = self._node("cpuset", dirs[:-1]).controller
        with kernel_errors(cgroup_path(dirs[:-1]), "cpuset.cpus"):
            parent_cpus, parent_mems = frozenset(parent.cpus), frozenset(parent.mems)
        cpus = set(parent_cpus)
        mems = set(parent_mems)
        if config.cpuset_cpus is not None:
            cpus = set(validate.checked_cpuset(cgroup, "cpuset.cpus", config.cpuset_cpus, parent_cpus))
        if config.cpuset_mems is not None:
            mems = set(validate.checked_cpuset(cgroup, "cpuset.mems", config.cpuset_mems, parent_mems))
        return cpus, mems

    def write(self, dirs: Dirs, config: ResourceConfig) -> None:
        cgroup = cgroup_path(dirs)
        self._write_cpu(cgroup, self._node("cpu", dirs).controller, config)
        memory = self._node("memory", dirs).controller
        wanted_memory = -1 if validate.is_unlimited(config.memory_limit) else config.memory_limit
        with kernel_errors(cgroup, "memory.limit_in_bytes"):
            current = memory.limit_in_bytes
            if current is not None and current >= _MEMORY_UNLIMITED_FROM:
                current = -1
            if (current if current is not None else -1) != wanted_memory:
                memory.limit_in_bytes = wanted_memory
        if "pids" in self._controllers:
            pids_dir = self._path("pids", dirs)
            wanted_pids = "max" if validate.is_unlimited(config.pids_limit) else str(config.pids_limit)
            if read_file(pids_dir, "pids.max") != wanted_pids:
                write_file(pids_dir, "pids.max", wanted_pids)
        cpus, mems = self._wanted_cpuset(dirs, config)
        cpuset = self._node("cpuset", dirs).controller
        with kernel_errors(cgroup, "cpuset.mems"):
            if cpuset.mems != mems:
                cpuset.mems = mems
        with kernel_errors(cgroup, "cpuset.cpus"):
            if cpuset.cpus != cpus:
                cpuset.cpus = cpus

    @staticmethod
    def _write_cpu(cgroup: str, cpu: Any, config: ResourceConfig) -> None:
        if config.cpu_shares is not None:
            with kernel_errors(cgroup, "cpu.shares"):
                if cpu.shares != config.cpu_shares:
                    cpu.shares = config.cpu_shares
                    if cpu.shares != config.cpu_shares:
                        raise CgroupError(
                            cgroup, "cpu.shares", f"kernel kept {cpu.shares}, not {config.cpu_shares}"
                        )
        wanted_quota = None if validate.is_unlimited(config.cpu_quota) else config.cpu_quota
        with kernel_errors(cgroup, "cpu.cfs_period_us"):
            period = cpu.cfs_period_us
        period_pending = config.cpu_period is not None and period != config.cpu_period
        if period_pending:
            # As runc does: the new period may be refused next to the old quota; retry after the quota.
            try:
                cpu.cfs_period_us = config.cpu_period
                period_pending = False
            except OSError:
                pass
        with kernel_errors(cgroup, "cpu.cfs_quota_us"):
            if cpu.cfs_quota_us != wanted_quota:
                cpu.cfs_quota_us = wanted_quota
        if period_pending:
            with kernel_errors(cgroup, "cpu.cfs_period_us"):
                cpu.cfs_period_us = config.cpu_period

    def procs_files(self, dirs: Dirs) -> list[str]:
        return [os.path.join(path, "cgroup.procs") for path in self._hierarchy_paths(dirs)]

    def pids(self, dirs: Dirs) -> set[int]:
        pids: set[int] = set()
        for path in self._hierarchy_paths(dirs):
            pids |= tree_pids(path)
        return pids

    def remove(self, dirs: Dirs) -> None:
        for name in self._distinct.values():
            leaf = self._path(name, dirs)
            for sub in subdirectories(leaf):
                remove_tree(os.path.join(leaf, sub))
            with kernel_errors(cgroup_path(dirs), f"({name} rmdir)"):
                if os.path.isdir(leaf):
                    self._node(name, dirs[:-1]).delete_cgroup(dirs[-1])  # cgroupspy wants a str name
        # A container runtime (runc, for CRI pods) makes the pod's path in every mounted hierarchy, devices,
        # freezer, blkio and the systemd one included; they are empty once the pod's processes are gone.
        for directory in other_hierarchies(self._mount_root, set(self._distinct)):
            remove_tree(os.path.join(directory, *dirs))

    def remove_if_empty(self, dirs: Dirs) -> None:
        for path in self._hierarchy_paths(dirs):
            with contextlib.suppress(OSError):  # still holds pods or tasks, or already gone
                os.rmdir(path)

    def children(self, dirs: Dirs) -> set[str]:
        names: set[str] = set()
        for path in self._hierarchy_paths(dirs):
            names |= subdirectories(path)
        return names

    def read_limits(self, dirs: Dirs) -> dict[str, str]:
        files = {
            "cpu": ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"),
            "memory": ("memory.limit_in_bytes",),
            "pids": ("pids.max",),
            "cpuset": ("cpuset.cpus", "cpuset.mems"),
        }
        limits: dict[str, str] = {}
        for controller, names in files.items():
            if controller in self._controllers:
                directory = self._path(controller, dirs)
                for name in names:
                    limits[name] = read_file(directory, name)
        quota = int(limits["cpu.cfs_quota_us"])
        limits["cpu_quota"] = "max" if quota < 0 else str(quota)
        limits["cpu_period"] = limits["cpu.cfs_period_us"]
        limits["cpu_shares"] = limits["cpu.shares"]
        memory = int(limits["memory.limit_in_bytes"])
        limits["memory_limit"] = "max" if memory >= _MEMORY_UNLIMITED_FROM else str(memory)
        limits["pids_limit"] = limits.get("pids.max", "max")
        limits["cpuset"] = format_cpuset(parse_cpuset(limits["cpuset.cpus"]))
        return limits

    def cpu_usage_ns(self, dirs: Dirs) -> int:
        with kernel_errors(cgroup_path(dirs), "cpuacct.usage"):
            return int(self._node("cpuacct", dirs).controller.usage or 0)

    def memory_working_set(self, dirs: Dirs) -> int:
        path = self._path("memory", dirs)
        usage = int(read_file(path, "memory.usage_in_bytes"))
        return max(0, usage - read_flat_key(path, "memory.stat", "total_inactive_file"))

    def oom_kills(self, dirs: Dirs) -> int:
        return read_flat_key(self._path("memory", dirs), "memory.oom_control", "oom_kill")


def other_hierarchies(mount_root: Path, managed: set[str]) -> list[str]:
    """The mounted v1 hierarchies other than `managed` (their real paths), each once."""
    found: dict[str, str] = {}
    for name in subdirectories(str(mount_root)):
        real = os.path.realpath(mount_root / name)
        if real not in managed:
            found.setdefault(real, real)
    return sorted(found)
