"""What one reading of a pod's resource usage is, whichever runtime took it (agent/stats, agent/eviction and
the status endpoint read it; each runtime's `pod_usage` makes it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from agent.container.podrecord import RUNNING, PodRecord


@dataclass(frozen=True)
class Usage:
    cpu_ns: int  # cumulative
    memory_working_set: int
    processes: int = 0
    sampled: float = field(default_factory=time.time)  # unix seconds of the reading


@dataclass(frozen=True)
class PodUsage:
    pod: Usage
    containers: Mapping[str, Usage]  # running containers by name
    ids: Mapping[str, str] = field(default_factory=dict)  # container name -> the runtime's id, where known


# The pod cgroup's usage and the pids in it (CgroupError or OSError when it is gone or unreadable).
CgroupReading = Callable[[], tuple[Usage, set[int]]]


def running_names(record: PodRecord) -> list[str]:
    return [c.name for c in record.containers.values() if c.state == RUNNING]  # sidecars too
