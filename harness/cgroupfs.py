"""The host's cgroup version for the harness and the benchmarks, and what depends on it.

Flow: `cgroup_version()` asks the agent's own detection (agent/cm/cgroups/detect.py: statfs of
/sys/fs/cgroup, a hybrid host is v1) once; `sweep_root` then picks the agent's v1 or v2 forced sweep,
and `process_tree` the directory whose cgroups list a root's processes. A fixture or benchmark that
goes through these runs unchanged on a v1 (or hybrid) host and on a v2 one.
"""

from __future__ import annotations

import functools
from pathlib import Path

from agent.cm.cgroups.detect import CGROUP_MOUNT, detect_version
from agent.cm.cgroups.v1 import V1_CONTROLLERS
from kubenode.cgroupsweep import sweep_v1_root, sweep_v2_root


@functools.cache
def cgroup_version() -> int:
    """1 or 2, as the agent decides it for this host."""
    return detect_version(CGROUP_MOUNT)


def sweep_root(root: str, *, attempts: int = 50, retry_delay: float = 0.02) -> list[str]:
    """Kill everything under `root` and remove it, in every v1 hierarchy or on the v2 mount; what stayed."""
    if cgroup_version() == 2:
        return sweep_v2_root(root, attempts=attempts, retry_delay=retry_delay)
    return sweep_v1_root(root, attempts=attempts, retry_delay=retry_delay)


def process_tree(root: str) -> Path:
    """Where the cgroups under `root` list their processes: v1's cpu hierarchy (every pod cgroup is in
    it), or the v2 mount."""
    if cgroup_version() == 2:
        return CGROUP_MOUNT / root.strip("/")
    return CGROUP_MOUNT / V1_CONTROLLERS[0] / root.strip("/")
