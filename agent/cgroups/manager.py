"""Placeholder: the pod cgroup manager lands in the next commit."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from agent.cgroups.api import Driver, PodCgroups


def build_manager(
    cgroup_root: str,
    driver: Driver,
    *,
    mount_root: Path,
    version: Literal[1, 2] | None,
    pids_limit: int,
    enforce_cpu_limits: bool,
) -> PodCgroups:
    raise NotImplementedError("agent.cgroups manager not implemented yet")
