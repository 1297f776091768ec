"""The process runtime's way of reading a pod's resource usage (the types are agent/container/usage.py).

`PodUsage` is the pod's cumulative CPU, memory working set and process count, and each running container's,
each with the time it was sampled (a CRI runtime stamps its own; the rate between two readings is taken
over those times, as the kubelet's CRI stats provider does). `CgroupReading` reads the pod cgroup: what the
kubelet's cadvisor path reads for a pod. The process runtime (`process_pod_usage`) gives the pod cgroup's
numbers to a pod's only container; in a pod with several (host processes have no per-container cgroup) each
container's share is the CPU time and resident memory of the processes in its session, found by the
identity each container process carries (kuberuntime/processes.py).
"""

from __future__ import annotations

import contextlib
import os

import psutil

from agent.container.podrecord import PodRecord
from agent.container.usage import CgroupReading, PodUsage, Usage, running_names
from agent.kuberuntime.identity import stamped_processes


def container_shares(pids: set[int]) -> dict[str, Usage]:
    """CPU time and resident memory of each container's processes (its session), by container name."""
    leaders = {p.pid: p.identity.container for p in stamped_processes(pids)}
    totals: dict[str, list[int]] = {}
    for pid in pids:
        with contextlib.suppress(OSError, psutil.Error):
            name = leaders.get(os.getsid(pid))
            if name is None:
                continue
            proc = psutil.Process(pid)
            times = proc.cpu_times()
            cpu = int((times.user + times.system + times.children_user + times.children_system) * 1e9)
            entry = totals.setdefault(name, [0, 0, 0])
            entry[0] += cpu
            entry[1] += int(proc.memory_info().rss)
            entry[2] += 1
    return {name: Usage(cpu, memory, count) for name, (cpu, memory, count) in totals.items()}


def process_pod_usage(record: PodRecord, cgroup: CgroupReading) -> PodUsage:
    """The process runtime's reading: the pod cgroup, shared out between its running containers."""
    usage, pids = cgroup()
    running = running_names(record)
    shares = {running[0]: usage} if len(running) == 1 else container_shares(pids)
    return PodUsage(usage, {name: shares[name] for name in running if name in shares})
