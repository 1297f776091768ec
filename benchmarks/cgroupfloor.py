"""The floors' raw cgroup calls, on cgroup v1 or v2: the files the agent touches, with nothing around them.

A floor times bare mkdir, write and read calls on the cgroup files the agent's own backend uses for the
same pods, so a benchmark's ratio is what the agent adds. `RawCgroups()` takes the host's version from the
agent's detection (harness/cgroupfs.py) and knows each version's files:
- v1: a directory per controller hierarchy (cpu, cpuacct, cpuset, memory, pids); a new cpuset gets its
  parent's cpus and mems before anything else (the kernel refuses tasks otherwise); limits in cpu.shares,
  cpu.cfs_period_us, cpu.cfs_quota_us, memory.limit_in_bytes, pids.max and cpuset.cpus/mems;
- v2: one directory, whose parent's cgroup.subtree_control must enable cpu, cpuset, memory and pids first;
  limits in cpu.weight (the kubelet's shares conversion), cpu.max, memory.max and pids.max (an unpinned
  pod's cpuset is left empty: v2 inherits the parent's).
Flow: `make_tier(path)` for the tiers -> `make_pod(path, limits)` per pod -> `make_container(path, limits)`
per container of a running pod (issue 37: its own cgroup below the pod's with its limits, and its device
rules, runc's default list: on v1 a cgroup of the devices hierarchy given `a` denied then one allow line
per rule; on v2 a device program, loaded once per floor and attached to each container cgroup, as the
agent shares one per rule set) -> `remove(path)` at the end; `usage_files(cgroup)` names what an eviction
round reads per pod.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.cm.cgroups.detect import CGROUP_MOUNT
from agent.cm.cgroups.formulas import QUOTA_PERIOD, shares_to_weight
from agent.cm.cgroups.v1 import V1_CONTROLLERS
from agent.cm.cgroups.v2 import WANTED_CONTROLLERS
from agent.cm.devicecgroup.bpf import attach, load_program
from agent.cm.devicecgroup.bpfprog import device_program
from agent.cm.devicecgroup.rules import DEFAULT_ALLOWED_DEVICES
from harness.cgroupfs import cgroup_version, sweep_root

# A container's device rules (runc's default list, no device specs): v1 lines after `a` is denied.
DEVICE_ALLOW_LINES = [rule.line().encode() for rule in DEFAULT_ALLOWED_DEVICES]


@dataclass(frozen=True)
class PodLimits:
    shares: int
    quota_us: int  # per QUOTA_PERIOD; -1: no CPU limit
    memory: int  # bytes; -1: no limit


def _write(path: Path, value: str) -> None:
    # The bare system calls, as the agent's backends make them (no buffered text file around them).
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class RawCgroups:
    def __init__(self, mount: Path = CGROUP_MOUNT) -> None:
        self.version = cgroup_version()
        self.mount = mount
        # v1: (cpuset.mems, cpuset.cpus) of each level, read once; the floor is the writes, not the reads.
        self._cpusets: dict[str, tuple[str, str]] = {}
        self._device_program = -1  # v2: loaded by the first make_container
        self._enabled: set[Path] = set()  # v2: pod cgroups whose controllers make_container enabled

    def make_tier(self, path: str) -> None:
        """Every missing level of `path` (below the mount), ready to hold pod cgroups."""
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            level, parent = "/".join(parts[:depth]), "/".join(parts[: depth - 1])
            if self.version == 2:
                self._enable_controllers(self.mount / parent)
                if not (self.mount / level).is_dir():
                    os.mkdir(self.mount / level)
                if depth == len(parts):
                    self._enable_controllers(self.mount / level)  # for the pods it will hold
                continue
            if (self.mount / "cpuset" / level).is_dir():
                continue
            for controller in V1_CONTROLLERS:
                os.makedirs(self.mount / controller / level, exist_ok=True)
            self._inherit_cpuset(level, parent)

    def _enable_controllers(self, directory: Path) -> None:
        offered = set((directory / "cgroup.controllers").read_text().split())
        enabled = set((directory / "cgroup.subtree_control").read_text().split())
        missing = [name for name in WANTED_CONTROLLERS if name in offered and name not in enabled]
        if missing:
            _write(directory / "cgroup.subtree_control", " ".join(f"+{name}" for name in missing))

    def _inherit_cpuset(self, level: str, parent: str) -> None:
        cpuset = self.mount / "cpuset"
        if parent not in self._cpusets:
            mems, cpus = ((cpuset / parent / f).read_text().strip() for f in ("cpuset.mems", "cpuset.cpus"))
            self._cpusets[parent] = mems, cpus
        mems, cpus = self._cpusets[parent]
        _write(cpuset / level / "cpuset.mems", mems)  # mems first: the kernel wants both before any task
        _write(cpuset / level / "cpuset.cpus", cpus)
        self._cpusets[level] = mems, cpus

    def make_pod(self, path: str, limits: PodLimits, *, kernel_defaults: bool = False) -> None:
        """One pod cgroup under an existing tier, its limits written. `kernel_defaults` writes also the
        values a new cgroup already holds (v1's 100 ms CFS period, pids.max "max"), as issue 23's floor
        for agent_bench.py does; without it, only what the agent's backend writes for a new pod."""
        name = path.strip("/")
        if self.version == 2:
            directory = self._make_v2(name, limits)
            if kernel_defaults:
                _write(directory / "pids.max", "max")
            return
        for controller in V1_CONTROLLERS:
            os.mkdir(self.mount / controller / name)
        cpu = self.mount / "cpu" / name
        _write(cpu / "cpu.shares", str(limits.shares))
        if kernel_defaults:
            _write(cpu / "cpu.cfs_period_us", str(QUOTA_PERIOD))
        _write(cpu / "cpu.cfs_quota_us", str(limits.quota_us))
        _write(self.mount / "memory" / name / "memory.limit_in_bytes", str(limits.memory))
        if kernel_defaults:
            _write(self.mount / "pids" / name / "pids.max", "max")
        self._inherit_cpuset(name, name.rsplit("/", 1)[0])

    def _make_v2(self, name: str, limits: PodLimits) -> Path:
        directory = self.mount / name
        os.mkdir(directory)
        quota = "max" if limits.quota_us < 0 else str(limits.quota_us)
        _write(directory / "cpu.weight", str(shares_to_weight(limits.shares)))
        _write(directory / "cpu.max", f"{quota} {QUOTA_PERIOD}")
        _write(directory / "memory.max", "max" if limits.memory < 0 else str(limits.memory))
        return directory

    def make_container(self, path: str, limits: PodLimits) -> None:
        """A container's cgroup below its (existing) pod cgroup: its limits and its device rules."""
        name = path.strip("/")
        if self.version == 2:
            pod = self.mount / name.rsplit("/", 1)[0]
            if pod not in self._enabled:
                self._enable_controllers(pod)  # once per pod: its first container
                self._enabled.add(pod)
            directory = self._make_v2(name, limits)
            if self._device_program < 0:
                self._device_program = load_program(device_program(DEFAULT_ALLOWED_DEVICES))
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                attach(fd, self._device_program)
            finally:
                os.close(fd)
            return
        for controller in V1_CONTROLLERS:
            os.mkdir(self.mount / controller / name)
        _write(self.mount / "cpu" / name / "cpu.shares", str(limits.shares))
        _write(self.mount / "cpu" / name / "cpu.cfs_quota_us", str(limits.quota_us))
        _write(self.mount / "memory" / name / "memory.limit_in_bytes", str(limits.memory))
        self._inherit_cpuset(name, name.rsplit("/", 1)[0])
        devices = self.mount / "devices" / name
        os.makedirs(devices)  # the pod's level too, allow-all, at its first container
        _write(devices / "devices.deny", "a")
        fd = os.open(devices / "devices.allow", os.O_WRONLY)
        try:
            for line in DEVICE_ALLOW_LINES:
                os.write(fd, line)
        finally:
            os.close(fd)

    def procs_files(self, cgroup: str) -> list[Path]:
        """The cgroup.procs files a process of `cgroup` (a container's: devices included on v1) joins."""
        name = cgroup.strip("/")
        if self.version == 2:
            return [self.mount / name / "cgroup.procs"]
        return [self.mount / c / name / "cgroup.procs" for c in (*V1_CONTROLLERS, "devices")]

    def usage_files(self, cgroup: str) -> list[Path]:
        """A pod's memory usage, its memory.stat and its process list: what an eviction round reads."""
        name = cgroup.strip("/")
        if self.version == 2:
            return [self.mount / name / f for f in ("memory.current", "memory.stat", "cgroup.procs")]
        memory = self.mount / "memory" / name
        pids = self.mount / "pids" / name
        return [memory / "memory.usage_in_bytes", memory / "memory.stat", pids / "cgroup.procs"]

    def remove(self, path: str) -> None:
        """Remove `path` and everything under it (killing any process left there); loud if any stays."""
        if self._device_program >= 0:
            os.close(self._device_program)
            self._device_program = -1
        left = sweep_root(path, attempts=100, retry_delay=0.01)
        if left:
            print(f"warning: could not remove {left}", file=sys.stderr)
