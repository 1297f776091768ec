"""A pod cgroup as the kernel shows it: its directory in every hierarchy, the limit files read there, the
processes in it (with their /proc/<pid>/cgroup membership) and the CPU time it used.

cgroup v1 (one hierarchy per controller under /sys/fs/cgroup/<controller>) and v2 (one unified tree, where
/sys/fs/cgroup/cgroup.controllers exists) are both read; only the files that exist are reported, as read.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

MOUNT = Path("/sys/fs/cgroup")
# The files `kubenode trace` reports, per v1 controller; on v2 all live in the one directory.
V1_FILES: dict[str, tuple[str, ...]] = {
    "cpu": ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"),
    "cpuacct": ("cpuacct.usage",),
    "cpuset": ("cpuset.cpus", "cpuset.mems"),
    "memory": ("memory.limit_in_bytes",),
    "pids": ("pids.max",),
}
V2_FILES = ("cpu.weight", "cpu.max", "cpuset.cpus", "cpuset.cpus.effective", "memory.max", "pids.max")


def is_v2(mount: Path = MOUNT) -> bool:
    return (mount / "cgroup.controllers").exists()


def _read(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        return path.read_text().strip()
    return None


def hierarchies(cgroup: str, mount: Path = MOUNT) -> dict[str, dict[str, Any]]:
    """hierarchy name ("cpu", "memory", ... or "unified") -> {"path": directory, "files": {name: value}}."""
    relative = cgroup.strip("/")
    if is_v2(mount):
        directory = mount / relative
        files = {name: value for name in V2_FILES if (value := _read(directory / name)) is not None}
        return {"unified": {"path": str(directory), "files": files}} if directory.is_dir() else {}
    found: dict[str, dict[str, Any]] = {}
    for controller_dir in sorted(mount.iterdir()):
        if controller_dir.is_symlink() or not controller_dir.is_dir() or controller_dir.name == "unified":
            continue  # cpu,cpuacct is mounted once with cpu and cpuacct as links to it
        directory = controller_dir / relative
        if not directory.is_dir():
            continue
        names = [n for controller in controller_dir.name.split(",") for n in V1_FILES.get(controller, ())]
        files = {name: value for name in names if (value := _read(directory / name)) is not None}
        found[controller_dir.name] = {"path": str(directory), "files": files}
    return found


def files_by_name(view: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Every file read, in one mapping (each name is read in one hierarchy only)."""
    return {name: value for h in view.values() for name, value in h["files"].items()}


def cpu_seconds(files: dict[str, str], view: dict[str, dict[str, Any]]) -> float | None:
    """CPU time used by the cgroup so far: cpuacct.usage (ns) on v1, cpu.stat usage_usec on v2."""
    if "cpuacct.usage" in files:
        return int(files["cpuacct.usage"]) / 1e9
    for hierarchy in view.values():
        stat = _read(Path(hierarchy["path"]) / "cpu.stat")
        for line in (stat or "").splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    return None


def processes(view: dict[str, dict[str, Any]]) -> list[int]:
    """Every pid in the cgroup and its children, read from one hierarchy's cgroup.procs files."""
    if not view:
        return []
    top = Path(next(iter(view.values()))["path"])
    pids: set[int] = set()
    for current, _dirs, _files in os.walk(top):
        for line in (_read(Path(current) / "cgroup.procs") or "").split():
            pids.add(int(line))
    return sorted(pids)


def membership(pid: int) -> dict[str, str]:
    """/proc/<pid>/cgroup as hierarchy -> path ("0::/..." on v2 is "unified")."""
    result = {}
    for line in (_read(Path(f"/proc/{pid}/cgroup")) or "").splitlines():
        _, controllers, path = line.split(":", 2)
        result[controllers or "unified"] = path
    return result


def command_line(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return ""


def environment(pid: int) -> dict[str, str]:
    with contextlib.suppress(OSError):
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        return dict(item.decode(errors="replace").partition("=")[::2] for item in raw.split(b"\0") if item)
    return {}


def container_view(pid: int, mount: Path = MOUNT) -> dict[str, Any]:
    """A process container's isolation as the kernel shows it: its own cgroup (from /proc/<pid>/cgroup)
    with the limit files, its device rules (v1: devices.list of its devices cgroup; v2: the device
    programs attached to its cgroup) and what its /dev holds (read through /proc/<pid>/root, its mount
    namespace)."""
    cgroups = membership(pid)
    path = cgroups.get("unified") if is_v2(mount) else cgroups.get("memory")
    view: dict[str, Any] = {"cgroup": path, "limits": files_by_name(hierarchies(path, mount)) if path else {}}
    if is_v2(mount):
        from agent.cm.devicecgroup import attached_programs  # the node's own bpf(2) query

        try:
            view["devicePrograms"] = len(attached_programs(mount / (path or "/").strip("/")))
        except OSError as exc:
            view["devicePrograms"] = str(exc)
    else:
        devices = cgroups.get("devices")
        rules = _read(mount / "devices" / devices.strip("/") / "devices.list") if devices else None
        view["deviceRules"] = (rules or "").split("\n") if rules else []
    with contextlib.suppress(OSError):
        view["dev"] = sorted(os.listdir(f"/proc/{pid}/root/dev"))
    return view
