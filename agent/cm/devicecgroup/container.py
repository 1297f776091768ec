"""A container cgroup's device rules, enforced by the controller this host's cgroup version has.

Flow: the pod cgroup manager (agent/cm/cgroups/manager.py `ensure_container`) makes the container's
cgroup and writes its limits, then calls `enforce(dirs, rules)` before the container's process is forked;
the process joins the cgroup (and, on v1, the devices cgroup `enforce` returns) before it execs.

- `V1Devices`: the v1 `devices` hierarchy is not one the pod cgroups use, so the container's cgroup is
  made there too, at the same path (its ancestors stay allow-all, as under runc: a v1 child can never
  be granted more than its parent), and `apply_v1` writes the rules. Its cgroup.procs is returned for
  the process to join. Chosen on v1 and on hybrid hosts (choose.py says why not the unified mount).
- `BpfDevices`: on cgroup v2 a device program attached to the container cgroup itself;
  `replace_device_program` leaves exactly one there, whether it is the first, an update or a restart.

The pod cgroup's removal takes these cgroups with it (the v1 manager removes the pod's path in every
mounted hierarchy, devices included; on v2 the program goes with its cgroup).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from agent.cm.devicecgroup.bpf import attached_programs, replace_device_program
from agent.cm.devicecgroup.rules import DeviceRule
from agent.cm.devicecgroup.v1 import DeviceCgroupError, apply_v1

Dirs = tuple[str, ...]


log = logging.getLogger(__name__)


class ContainerDevices(Protocol):
    def enforce(self, dirs: Dirs, rules: Sequence[DeviceRule]) -> list[str]:
        """Make the container cgroup `dirs` allow exactly `rules`; the further cgroup.procs files to join."""

    def procs_files(self, dirs: Dirs) -> list[str]:
        """The further cgroup.procs files of an existing container cgroup (an exec joins them)."""

    def describe(self, dirs: Dirs) -> list[str]:
        """What is in force, one line each (for `kubenode trace pod`)."""


class V1Devices:
    def __init__(self, mount_root: Path) -> None:
        self.root = mount_root / "devices"
        self._mounted = False  # seen mounted once: a hierarchy is not unmounted under a running agent

    def _dir(self, dirs: Dirs) -> Path:
        return self.root.joinpath(*dirs)

    def enforce(self, dirs: Dirs, rules: Sequence[DeviceRule]) -> list[str]:
        if not self._mounted:
            if not (self.root / "devices.list").is_file():
                raise DeviceCgroupError(0, f"{self.root}: the v1 devices controller is not mounted")
            self._mounted = True
        directory = self._dir(dirs)
        try:
            made = _make_dir(directory)
        except OSError as exc:
            raise DeviceCgroupError(exc.errno, f"{directory}: mkdir: {exc.strerror}") from None
        # A cgroup made just now holds no task: its rules are written from scratch, nothing read.
        apply_v1(directory, rules, fresh=made)
        return [str(directory / "cgroup.procs")]

    def procs_files(self, dirs: Dirs) -> list[str]:
        procs = self._dir(dirs) / "cgroup.procs"
        return [str(procs)] if procs.exists() else []

    def describe(self, dirs: Dirs) -> list[str]:
        try:
            text = (self._dir(dirs) / "devices.list").read_text()
        except OSError as exc:
            return [f"devices.list: {exc.strerror}"]
        return [f"v1 devices.list: {line}" for line in text.splitlines() if line.strip()]


class BpfDevices:
    def __init__(self, mount_root: Path) -> None:
        self.root = mount_root

    def enforce(self, dirs: Dirs, rules: Sequence[DeviceRule]) -> list[str]:
        replace_device_program(self.root.joinpath(*dirs), rules)
        return []

    def procs_files(self, dirs: Dirs) -> list[str]:
        return []  # the program is on the container cgroup itself

    def describe(self, dirs: Dirs) -> list[str]:
        try:
            programs = attached_programs(self.root.joinpath(*dirs))
        except OSError as exc:
            return [f"device programs: {exc}"]
        return [f"v2 device program id {program}" for program in programs] or ["no device program"]


def _make_dir(directory: Path) -> bool:
    """mkdir `directory` (its missing parents too: the pod's level, the first time); True if made now. One
    mkdir where the directory's parent exists, which is every container after a pod's first."""
    try:
        os.mkdir(directory)
    except FileExistsError:
        return False
    except FileNotFoundError:
        os.makedirs(directory.parent, exist_ok=True)
        try:
            os.mkdir(directory)
        except FileExistsError:
            return False
    return True


def devices_for(version: int, mount_root: Path) -> ContainerDevices | None:
    """None where the v1 devices hierarchy is mounted read-only for the agent: inside systemd-nspawn (which
    keeps it so, that a container cannot widen its own device access) the container manager's device policy
    already binds every pod, and the agent could not write a rule. One warning says so; each container
    still gets its own /dev."""
    if version == 2:
        return BpfDevices(mount_root)
    devices = V1Devices(mount_root)
    if devices.root.is_dir() and os.statvfs(devices.root).f_flag & os.ST_RDONLY:  # the mount, not permissions
        log.warning(
            "%s is read-only here (a container's cgroup namespace?): no per-container device rules; "
            "the containers get their own /dev, and the enclosing device policy binds them",
            devices.root,
        )
        return None
    return devices
