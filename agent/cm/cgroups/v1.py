"""cgroup v1: one hierarchy per controller (cpu, cpuacct, cpuset, memory, pids), driven through its files.

Each controller's mount directory is resolved once; a cgroup's directory in a hierarchy is that
path joined with its names, and every value is one read or one write of an interface file (a
pod's sync touches some sixty, so no per-path object is built). Values as the kernel takes them:
-1 is "no limit" for cpu.cfs_quota_us and memory.limit_in_bytes; cpuset files hold list strings
("0-3,6"); a new cpuset child starts empty and gets its parent's cpus and mems before anything else.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from agent.cm.cgroups import validate
from agent.cm.cgroups.api import CgroupError, ResourceConfig
from agent.cm.cgroups.backend import Dirs, cgroup_path
from agent.cm.cgroups.files import (
    kernel_error,
    kernel_errors,
    read_file,
    read_flat_key,
    remove_tree,
    subdirectories,
    tree_pids,
)
from agent.cm.cgroups.formulas import QUOTA_PERIOD
from kubenode.cpuset import format_cpuset, parse_cpuset

REQUIRED = ("cpu", "cpuacct", "cpuset", "memory")
OPTIONAL = ("pids",)
V1_CONTROLLERS = REQUIRED + OPTIONAL  # every controller a pod cgroup has a directory in
# memory.limit_in_bytes reads back as 9223372036854771712 (page-rounded LONG_MAX) when unlimited.
_MEMORY_UNLIMITED_FROM = 1 << 62
_UNLIMITED = -1
_MAX_VALUE_BYTES = 65536  # the files read here hold one number or one CPU list
# What a new v1 cgroup's files hold (kernel: ROOT_TASK_GROUP_LOAD shares, default_cfs_period() 100 ms with
# no quota, PAGE_COUNTER_MAX memory, pids "max").
_FRESH = {"cpu.shares": 1024, "cpu.cfs_period_us": 100000, "cpu.cfs_quota_us": _UNLIMITED}


class V1Hierarchies:
    version = 1

    def __init__(self, mount_root: Path) -> None:
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
        self._base = {name: os.path.join(str(mount_root), name) for name in self._controllers}
        # Cgroups create() just made in every hierarchy and write() has not written yet: write() takes their
        # values as the kernel's defaults (_FRESH) and their cpuset (cpus, mems) as the one they inherited,
        # instead of reading each file back. Calls for one cgroup come from one thread (the pod's worker).
        self._fresh: dict[Dirs, tuple[frozenset[int], frozenset[int]] | None] = {}
        self._inherited: dict[Dirs, tuple[frozenset[int], frozenset[int]]] = {}
        self._mount_root = mount_root

    def _path(self, controller: str, dirs: Dirs) -> str:
        return "/".join((self._base[controller], *dirs))

    def _hierarchy_paths(self, dirs: Dirs) -> list[str]:
        return [self._path(name, dirs) for name in self._distinct.values()]

    def _get(self, controller: str, dirs: Dirs, file: str) -> str:
        """An interface file's value; a kernel error names the cgroup and the file."""
        try:
            fd = os.open(f"{self._path(controller, dirs)}/{file}", os.O_RDONLY)
            try:
                data = os.read(fd, _MAX_VALUE_BYTES)
            finally:
                os.close(fd)
        except OSError as err:
            raise kernel_error(cgroup_path(dirs), file, err) from err
        return data.decode("ascii").strip()

    def _set(self, controller: str, dirs: Dirs, file: str, value: str) -> None:
        try:
            fd = os.open(f"{self._path(controller, dirs)}/{file}", os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, value.encode("ascii"))
            finally:
                os.close(fd)
        except OSError as err:
            raise kernel_error(cgroup_path(dirs), file, err) from err

    def _get_int(self, controller: str, dirs: Dirs, file: str) -> int:
        return int(self._get(controller, dirs, file))

    def exists(self, dirs: Dirs) -> bool:
        return all(os.path.isdir(path) for path in self._hierarchy_paths(dirs))

    def exists_anywhere(self, dirs: Dirs) -> bool:
        return any(os.path.isdir(path) for path in self._hierarchy_paths(dirs))

    def create(self, dirs: Dirs) -> bool:
        made = [self._make(name, dirs) for name in self._distinct.values()]
        if all(made):
            # New in every hierarchy: its files hold the kernel's defaults, and its cpuset the parent's.
            self._fresh[dirs] = self._inherited.pop(dirs, None)
        else:
            self._inherited.pop(dirs, None)
        return any(made)

    def _make(self, controller: str, dirs: Dirs) -> bool:
        """mkdir dirs (and missing ancestors) in one hierarchy; True if the leaf was made."""
        if not dirs:
            return False
        path = self._path(controller, dirs)
        try:
            os.mkdir(path)  # one call where a stat and then a mkdir were made before
        except FileExistsError:
            return False
        except FileNotFoundError:
            self._make(controller, dirs[:-1])
            with kernel_errors(cgroup_path(dirs), f"({controller} mkdir)"):
                os.mkdir(path)
        except OSError as err:
            with kernel_errors(cgroup_path(dirs), f"({controller} mkdir)"):
                raise err
        if controller == "cpuset":
            self._inherit_cpuset(dirs)
        return True

    def _inherit_cpuset(self, dirs: Dirs) -> None:
        # A new v1 cpuset child starts with no cpus/mems and refuses tasks (ENOSPC) until given some.
        mems, cpus = (self._get("cpuset", dirs[:-1], file) for file in ("cpuset.mems", "cpuset.cpus"))
        self._set("cpuset", dirs, "cpuset.mems", mems or "\n")
        self._set("cpuset", dirs, "cpuset.cpus", cpus or "\n")
        with contextlib.suppress(ValueError):  # unparsable: write() reads them back instead
            self._inherited[dirs] = (parse_cpuset(cpus), parse_cpuset(mems))

    def validate(self, dirs: Dirs, config: ResourceConfig) -> None:
        cgroup = cgroup_path(dirs)
        validate.check_shares(cgroup, "cpu.shares", config.cpu_shares)
        validate.check_quota_period(cgroup, "cpu.cfs_quota_us", config.cpu_quota, config.cpu_period)
        validate.check_memory(cgroup, "memory.limit_in_bytes", config.memory_limit)
        validate.check_pids(cgroup, "pids.max", config.pids_limit)
        if not validate.is_unlimited(config.cpu_quota):
            parent = dirs[:-1]
            parent_quota = self._get_int("cpu", parent, "cpu.cfs_quota_us")
            parent_period = self._get_int("cpu", parent, "cpu.cfs_period_us")
            validate.check_quota_within_parent(
                cgroup,
                "cpu.cfs_quota_us",
                config.cpu_quota,
                config.cpu_period or QUOTA_PERIOD,
                None if parent_quota == _UNLIMITED else parent_quota,
                parent_period,
            )
        if config.pids_limit is not None and config.pids_limit > 0 and "pids" not in self._controllers:
            raise CgroupError(cgroup, "pids.max", "the pids controller is not mounted")
        self._wanted_cpuset(dirs, config)

    def _cpus(self, dirs: Dirs, file: str) -> frozenset[int]:
        value = self._get("cpuset", dirs, file)
        try:
            return parse_cpuset(value)
        except ValueError as err:
            raise CgroupError(cgroup_path(dirs), file, str(err)) from None

    def _wanted_cpuset(
        self,
        dirs: Dirs,
        config: ResourceConfig,
        parent: tuple[frozenset[int], frozenset[int]] | None = None,
    ) -> tuple[frozenset[int], frozenset[int]]:
        """(cpus, mems) the cgroup should hold; `parent` is the parent's, when known without reading."""
        cgroup = cgroup_path(dirs)
        if parent is None:
            parent = self._cpus(dirs[:-1], "cpuset.cpus"), self._cpus(dirs[:-1], "cpuset.mems")
        parent_cpus, parent_mems = parent
        cpus, mems = parent_cpus, parent_mems
        if config.cpuset_cpus is not None:
            cpus = validate.checked_cpuset(cgroup, "cpuset.cpus", config.cpuset_cpus, parent_cpus)
        if config.cpuset_mems is not None:
            mems = validate.checked_cpuset(cgroup, "cpuset.mems", config.cpuset_mems, parent_mems)
        return cpus, mems

    def write(self, dirs: Dirs, config: ResourceConfig) -> None:
        fresh = dirs in self._fresh
        inherited = self._fresh.pop(dirs, None)
        self._write_cpu(dirs, config, fresh)
        wanted_memory = _UNLIMITED if validate.is_unlimited(config.memory_limit) else config.memory_limit
        current = _UNLIMITED if fresh else self._get_int("memory", dirs, "memory.limit_in_bytes")
        if current >= _MEMORY_UNLIMITED_FROM:
            current = _UNLIMITED
        if current != wanted_memory:
            self._set("memory", dirs, "memory.limit_in_bytes", str(wanted_memory))
        if "pids" in self._controllers:
            wanted_pids = "max" if validate.is_unlimited(config.pids_limit) else str(config.pids_limit)
            if ("max" if fresh else self._get("pids", dirs, "pids.max")) != wanted_pids:
                self._set("pids", dirs, "pids.max", wanted_pids)
        if inherited is None:
            cpus, mems = self._wanted_cpuset(dirs, config)
            current_cpus, current_mems = self._cpus(dirs, "cpuset.cpus"), self._cpus(dirs, "cpuset.mems")
        else:
            cpus, mems = self._wanted_cpuset(dirs, config, parent=inherited)
            current_cpus, current_mems = inherited
        if current_mems != mems:
            self._set("cpuset", dirs, "cpuset.mems", format_cpuset(mems))
        if current_cpus != cpus:
            self._set("cpuset", dirs, "cpuset.cpus", format_cpuset(cpus))

    def fit_children_cpusets(self, dirs: Dirs, cpus: str | None, *, before: bool) -> None:
        """v1 refuses (EBUSY) a cpuset.cpus that leaves out a CPU a child cgroup holds, and a child cannot
        hold a CPU its parent lacks: around a write of `dirs`'s cpus, its container cgroups are narrowed
        to the CPUs kept `before`, and given the parent's whole set after."""
        if cpus is None or not os.path.isdir(self._path("cpuset", dirs)):
            return
        wanted = parse_cpuset(cpus)
        for name in subdirectories(self._path("cpuset", dirs)):
            child = (*dirs, name)
            held = self._cpus(child, "cpuset.cpus")
            target = (held & wanted or held) if before else wanted
            if target != held:
                self._set("cpuset", child, "cpuset.cpus", format_cpuset(target))

    def _write_cpu(self, dirs: Dirs, config: ResourceConfig, fresh: bool) -> None:
        def current(file: str) -> int:
            return _FRESH[file] if fresh else self._get_int("cpu", dirs, file)

        if config.cpu_shares is not None and current("cpu.shares") != config.cpu_shares:
            # Not read back: the kernel keeps what it takes, and validate() refused the values it would
            # clamp (outside [MIN_SHARES, MAX_SHARES]).
            self._set("cpu", dirs, "cpu.shares", str(config.cpu_shares))
        wanted_quota = _UNLIMITED if validate.is_unlimited(config.cpu_quota) else config.cpu_quota
        period = current("cpu.cfs_period_us")
        period_pending = config.cpu_period is not None and period != config.cpu_period
        if period_pending:
            # As runc does: the new period may be refused next to the old quota; retry after the quota.
            try:
                self._set("cpu", dirs, "cpu.cfs_period_us", str(config.cpu_period))
                period_pending = False
            except CgroupError:
                pass
        if current("cpu.cfs_quota_us") != wanted_quota:
            self._set("cpu", dirs, "cpu.cfs_quota_us", str(wanted_quota))
        if period_pending:
            self._set("cpu", dirs, "cpu.cfs_period_us", str(config.cpu_period))

    def procs_files(self, dirs: Dirs) -> list[str]:
        return [os.path.join(path, "cgroup.procs") for path in self._hierarchy_paths(dirs)]

    def pids(self, dirs: Dirs) -> set[int]:
        pids: set[int] = set()
        for path in self._hierarchy_paths(dirs):
            pids |= tree_pids(path)
        return pids

    def remove(self, dirs: Dirs) -> None:
        self._fresh.pop(dirs, None)
        self._inherited.pop(dirs, None)
        for name in self._distinct.values():
            leaf = self._path(name, dirs)
            for sub in subdirectories(leaf):
                remove_tree(os.path.join(leaf, sub))
            with kernel_errors(cgroup_path(dirs), f"({name} rmdir)"):
                if os.path.isdir(leaf):
                    os.rmdir(leaf)
        # A container runtime (runc, for CRI pods) makes the pod's path in every mounted hierarchy, devices,
        # freezer, blkio and the systemd one included; they are empty once the pod's processes are gone.
        for directory in other_hierarchies(self._mount_root, set(self._distinct)):
            remove_tree(os.path.join(directory, *dirs))

    def remove_if_empty(self, dirs: Dirs) -> None:
        # The devices hierarchy holds the containers' device cgroups (agent/cm/devicecgroup/container.py).
        others = [os.path.join(d, *dirs) for d in other_hierarchies(self._mount_root, set(self._distinct))]
        for path in [*self._hierarchy_paths(dirs), *others]:
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
        return int(self._get("cpuacct", dirs, "cpuacct.usage") or 0)

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
