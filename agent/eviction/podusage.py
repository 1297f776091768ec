"""What each pod uses, for the eviction manager, and the node-level reclaim of dead containers' logs.

A pod's ephemeral storage is its log directory (every container's restarts and rotations) plus its disk-backed
emptyDir volumes under `<stateDir>/pods/<uid>/volumes/kubernetes.io~empty-dir/` (a memory-backed one counts as
memory, as in the kubelet). Memory is the pod cgroup's working set, processes the pids in the pod cgroup.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent.cm.cgroups import CgroupError, PodCgroups
from agent.container.podrecord import PodRecord
from agent.eviction.manager import SYSTEM_CRITICAL_PRIORITY, PodUsage
from agent.logs.reader import log_files
from kubenode.model import Pod

EMPTY_DIR_PLUGIN = "kubernetes.io~empty-dir"


def disk_usage(path: Path, device: int | None = None) -> int:
    """Bytes allocated under `path` (du), counting only files on `device` when given."""
    total = 0
    try:
        for root, _dirs, files in os.walk(path):
            for name in files:
                try:
                    st = os.lstat(os.path.join(root, name))
                except OSError:
                    continue
                if device is None or st.st_dev == device:
                    total += st.st_blocks * 512
    except OSError:
        return total
    return total


def _empty_dir_limits(pod: Pod) -> dict[str, int | None]:
    from kubenode.model.quantity import to_amount

    limits: dict[str, int | None] = {}
    spec: Any = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    for volume in (spec or {}).get("volumes") or []:
        empty = volume.get("emptyDir") if isinstance(volume, dict) else None
        if isinstance(empty, dict) and empty.get("medium") != "Memory":
            size = empty.get("sizeLimit")
            limits[str(volume.get("name"))] = to_amount("memory", size) if size is not None else None
    return limits


def has_storage_limit(usage: PodUsage) -> bool:
    """Whether local-storage eviction can apply: a container's ephemeral-storage limit, or a disk-backed
    emptyDir's sizeLimit (its entry in `usage.empty_dirs`). A pod with neither cannot exceed what it was not
    given, whatever it uses."""
    if any("ephemeral-storage" in c.limits for c in usage.pod.all_containers):
        return True
    return any(limit is not None for _, limit in usage.empty_dirs.values())


def pod_usage(
    pod: Pod, cgroups: PodCgroups, logs_dir: Path, state_dir: Path, *, placed: bool = True
) -> PodUsage:
    """The pod's entry for one round. Its storage is read now only if it has a limit to be held to (every
    round checks those); its memory and processes, and anyone's storage for ranking, are read by `measure`
    when a threshold is met. A pod not `placed` (its first sync has not made its cgroup yet) has started
    nothing, so it uses nothing and nothing is read: an agent's first round, as 110 pods start, costs no
    reads for the pods still queued."""
    usage = PodUsage(
        pod, critical=pod.source != "api" or pod.priority >= SYSTEM_CRITICAL_PRIORITY, placed=placed
    )
    usage.container_disk = {c.name: 0 for c in pod.all_containers}
    usage.empty_dirs = {name: (0, limit) for name, limit in _empty_dir_limits(pod).items()}
    if placed and has_storage_limit(usage):
        read_storage(usage, logs_dir, state_dir)
    return usage


def measure(usage: PodUsage, resource: str, cgroups: PodCgroups, logs_dir: Path, state_dir: Path) -> None:
    """Fill in what ranking by `resource` (memory, pids, ephemeral-storage, inodes) needs, once."""
    if not usage.placed:
        return
    if resource in ("memory", "pids") and not usage.live_read:
        usage.live_read = True
        try:
            usage.memory = cgroups.memory_working_set(usage.pod.uid)
            usage.processes = len(cgroups.pids(usage.pod.uid))
        except (CgroupError, OSError, ValueError):
            pass  # no cgroup yet: nothing used
    elif resource in ("ephemeral-storage", "inodes") and not usage.storage_read:
        read_storage(usage, logs_dir, state_dir)


def read_storage(usage: PodUsage, logs_dir: Path, state_dir: Path) -> None:
    """The pod's logs (each container's, every restart and rotation) and its disk-backed emptyDirs."""
    usage.storage_read = True
    pod = usage.pod
    device = os.stat(state_dir).st_dev
    for c in pod.all_containers:
        usage.container_disk[c.name] = disk_usage(logs_dir / c.name)
    usage.disk = sum(usage.container_disk.values())
    volumes = state_dir / "pods" / pod.uid / "volumes" / EMPTY_DIR_PLUGIN
    for name, (_, limit) in list(usage.empty_dirs.items()):  # the pod's emptyDirs, as pod_usage listed them
        used = disk_usage(volumes / name, device)
        usage.empty_dirs[name] = (used, limit)
        usage.disk += used


def reclaim_dead_logs(records: list[PodRecord]) -> int:
    """Remove the logs of container restarts older than the previous one (kept for `kubectl logs
    --previous`, as the kubelet's container GC keeps the last dead container); returns the bytes freed."""
    freed = 0
    for record in records:
        for c in list(record.containers.values()):
            if not c.log_path:
                continue
            current = Path(c.log_path)
            keep_from = c.restart_count - 1
            for old in current.parent.glob("*.log"):
                if old.stem.isdigit() and int(old.stem) < keep_from:
                    for path in log_files(old):
                        try:
                            freed += path.stat().st_blocks * 512
                            path.unlink()
                        except OSError:
                            continue
    return freed
