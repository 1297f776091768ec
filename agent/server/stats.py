"""The kubelet's resource stats: `/stats/summary` (the Summary API) and `/metrics/resource`, from the cgroups.

Flow: a scrape calls `StatsProvider.collect()`, which reads
- the node: CPU from /proc/stat (busy time of every CPU), memory working set as MemTotal - MemAvailable
  from /proc/meminfo, available bytes, the pid limit and the number of processes (/proc);
- each pod the agent runs with a pod cgroup and a running container: the runtime that runs it answers
  `pod_usage` (agent/container/runtime.py), given a reader of the pod cgroup (cumulative CPU from
  cpuacct.usage on v1 or cpu.stat usage_usec on v2; working set as usage less inactive file pages; the
  pids in it). The process runtime shares the cgroup's numbers out between containers by their processes;
  the CRI runtime asks containerd (ListPodSandboxStats, or ListContainerStats): agent/stats/.
`summary_json` shapes it as stats/v1alpha1 Summary (usageNanoCores from the previous reading of the same
pod or container ID, over the readings' own sample times, as the kubelet's cpuUsageCache: so from the
second scrape on); `resource_metrics_text` as the kubelet's Prometheus text, with its names and a
millisecond timestamp on each sample, so metrics-server (or `kubenode apiserver`'s metrics.k8s.io) can scrape
it: node_cpu_usage_seconds_total, node_memory_working_set_bytes, pod_cpu_usage_seconds_total,
pod_memory_working_set_bytes, container_cpu_usage_seconds_total, container_memory_working_set_bytes,
container_start_time_seconds, and scrape_error / resource_scrape_error (1 when some pod could not be read).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
import psutil

from agent.cm.cgroups import CgroupError
from agent.container.podrecord import RUNNING, PodRecord
from agent.container.usage import PodUsage, Usage

if TYPE_CHECKING:
    from agent.cm.cgroups import PodCgroups
    from agent.container.podview import PodView
    from agent.container.runtime import PodRuntime

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"
_USER_HZ = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ContainerStats:
    name: str
    started: str  # RFC 3339
    usage: Usage
    key: str  # the rate's cache key: the pod UID and the runtime's container ID (or the name)


@dataclass(frozen=True)
class PodStats:
    namespace: str
    name: str
    uid: str
    started: str
    usage: Usage
    containers: tuple[ContainerStats, ...]


@dataclass(frozen=True)
class NodeStats:
    usage: Usage
    memory_available: int
    memory_total: int
    max_pid: int


@dataclass
class Snapshot:
    timestamp: float  # unix seconds
    node: NodeStats
    pods: list[PodStats] = field(default_factory=list)
    errors: int = 0


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_cpu_ns(stat_text: str) -> int:
    """Busy CPU time of all CPUs: /proc/stat's first line (user nice system idle iowait irq softirq steal)."""
    fields = [int(v) for v in stat_text.split("\n", 1)[0].split()[1:9]]
    busy = sum(fields) - fields[3] - fields[4]
    return busy * 1_000_000_000 // _USER_HZ


def meminfo(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            values[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return values


def read_node() -> NodeStats:
    with open("/proc/stat") as f:
        cpu = node_cpu_ns(f.read())
    with open("/proc/meminfo") as f:
        memory = meminfo(f.read())
    with open("/proc/sys/kernel/pid_max") as f:
        max_pid = int(f.read())
    processes = sum(1 for name in os.listdir("/proc") if name.isdigit())
    total, available = memory.get("MemTotal", 0), memory.get("MemAvailable", 0)
    return NodeStats(Usage(cpu, max(0, total - available), processes), available, total, max_pid)


class StatsProvider:
    def __init__(
        self,
        pods: Callable[[], Sequence[PodView]],
        cgroups: PodCgroups,
        node_name: str,
        runtime: Callable[[], PodRuntime],
    ) -> None:
        self._pods = pods
        self._cgroups = cgroups
        self._runtime = runtime  # the agent's, read at each scrape (the CRI wiring replaces it)
        self.node_name = node_name
        self._lock = threading.Lock()
        # key -> (sample time, cumulative cpu ns, the rate it gave)
        self._previous: dict[str, tuple[float, int, int | None]] = {}
        self._boot = psutil.boot_time()

    def _cgroup(self, uid: str) -> tuple[Usage, set[int]]:
        pids = self._cgroups.pids(uid)
        usage = Usage(self._cgroups.cpu_usage_ns(uid), self._cgroups.memory_working_set(uid), len(pids))
        return usage, pids

    def _read(self, record: PodRecord) -> PodUsage | None:
        """The runtime's reading of the pod; None when it is gone meanwhile or unreadable."""
        try:
            return self._runtime().pod_usage(record, lambda: self._cgroup(record.uid))
        except (CgroupError, OSError, ValueError, RuntimeError):
            return None

    def collect(self) -> Snapshot:
        timestamp = time.time()
        snapshot = Snapshot(timestamp, read_node())
        for view in self._pods():
            record = view.record
            running = [c for c in record.containers.values() if c.state == RUNNING]  # sidecars too
            if not record.cgroup or not running:
                continue
            read = self._read(record)
            if read is None:
                snapshot.errors += 1  # the kubelet's scrape_error
                continue
            containers = tuple(
                ContainerStats(
                    c.name,
                    c.started_at or record.start_time,
                    read.containers[c.name],
                    f"{record.uid}/{read.ids.get(c.name, c.name)}",
                )
                for c in running
                if c.name in read.containers
            )
            started = record.start_time or rfc3339(timestamp)
            snapshot.pods.append(
                PodStats(record.namespace, record.name, record.uid, started, read.pod, containers)
            )
        return snapshot

    def _nano_cores(self, key: str, timestamp: float, cpu_ns: int) -> int | None:
        """usageNanoCores since the previous reading of `key` (None on the first); the same reading again
        (a runtime's sample served to two scrapes) keeps the rate it had, as the kubelet's cache does."""
        with self._lock:
            before = self._previous.get(key)
            if before is not None and (timestamp, cpu_ns) == before[:2]:
                return before[2]
            rate = None
            if before is not None and timestamp > before[0] and cpu_ns >= before[1]:
                rate = int((cpu_ns - before[1]) / (timestamp - before[0]))
            self._previous[key] = (timestamp, cpu_ns, rate)
        return rate

    def _cpu(self, key: str, usage: Usage) -> dict[str, Any]:
        cpu: dict[str, Any] = {"time": rfc3339(usage.sampled), "usageCoreNanoSeconds": usage.cpu_ns}
        cores = self._nano_cores(key, usage.sampled, usage.cpu_ns)
        if cores is not None:
            cpu["usageNanoCores"] = cores
        return cpu

    def summary_json(self) -> dict[str, Any]:
        s = self.collect()
        when = rfc3339(s.timestamp)
        node = s.node
        pods = []
        live = {"node"}
        for pod in s.pods:
            containers = []
            for c in pod.containers:
                live.add(c.key)
                containers.append(
                    {
                        "name": c.name,
                        "startTime": c.started,
                        "cpu": self._cpu(c.key, c.usage),
                        "memory": {
                            "time": rfc3339(c.usage.sampled),
                            "workingSetBytes": c.usage.memory_working_set,
                        },
                    }
                )
            live.add(pod.uid)
            pods.append(
                {
                    "podRef": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                    "startTime": pod.started,
                    "containers": containers,
                    "cpu": self._cpu(pod.uid, pod.usage),
                    "memory": {
                        "time": rfc3339(pod.usage.sampled),
                        "workingSetBytes": pod.usage.memory_working_set,
                    },
                    "process_stats": {"process_count": pod.usage.processes},
                }
            )
        with self._lock:
            for key in set(self._previous) - live:
                del self._previous[key]  # pods and containers that are gone
        return {
            "node": {
                "nodeName": self.node_name,
                "startTime": rfc3339(self._boot),
                "cpu": self._cpu("node", node.usage),
                "memory": {
                    "time": when,
                    "availableBytes": node.memory_available,
                    "usageBytes": node.usage.memory_working_set,
                    "workingSetBytes": node.usage.memory_working_set,
                },
                "rlimit": {"time": when, "maxpid": node.max_pid, "curproc": node.usage.processes},
            },
            "pods": pods,
        }

    def summary_route(self) -> tuple[int, str, bytes]:
        return 200, JSON_CONTENT_TYPE, orjson.dumps(self.summary_json())

    def resource_metrics_text(self) -> str:
        s = self.collect()
        lines: list[str] = []

        def family(name: str, kind: str, text: str, samples: list[tuple[str, float, float]]) -> None:
            # Each sample carries the time it was read (a CRI runtime's own), which the rate is taken over.
            lines.append(f"# HELP {name} [STABLE] {text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(f"{name}{labels} {value:.9g} {int(at * 1000)}" for labels, value, at in samples)

        def pod_labels(pod: PodStats, container: str | None = None) -> str:
            inner = f'namespace="{_escape(pod.namespace)}",pod="{_escape(pod.name)}"'
            if container is not None:
                inner = f'container="{_escape(container)}",{inner}'
            return "{" + inner + "}"

        containers = [(pod, c) for pod in s.pods for c in pod.containers]
        family(
            "container_cpu_usage_seconds_total",
            "counter",
            "Cumulative cpu time consumed by the container in core-seconds",
            [(pod_labels(p, c.name), c.usage.cpu_ns / 1e9, c.usage.sampled) for p, c in containers],
        )
        family(
            "container_memory_working_set_bytes",
            "gauge",
            "Current working set of the container in bytes",
            [(pod_labels(p, c.name), c.usage.memory_working_set, c.usage.sampled) for p, c in containers],
        )
        family(
            "container_start_time_seconds",
            "gauge",
            "Start time of the container since unix epoch in seconds",
            [(pod_labels(p, c.name), _epoch(c.started), s.timestamp) for p, c in containers if c.started],
        )
        family(
            "node_cpu_usage_seconds_total",
            "counter",
            "Cumulative cpu time consumed by the node in core-seconds",
            [("", s.node.usage.cpu_ns / 1e9, s.node.usage.sampled)],
        )
        family(
            "node_memory_working_set_bytes",
            "gauge",
            "Current working set of the node in bytes",
            [("", s.node.usage.memory_working_set, s.node.usage.sampled)],
        )
        family(
            "pod_cpu_usage_seconds_total",
            "counter",
            "Cumulative cpu time consumed by the pod in core-seconds",
            [(pod_labels(p), p.usage.cpu_ns / 1e9, p.usage.sampled) for p in s.pods],
        )
        family(
            "pod_memory_working_set_bytes",
            "gauge",
            "Current working set of the pod in bytes",
            [(pod_labels(p), p.usage.memory_working_set, p.usage.sampled) for p in s.pods],
        )
        error = 1 if s.errors else 0
        for name in ("resource_scrape_error", "scrape_error"):
            lines.append(
                f"# HELP {name} [STABLE] 1 if there was an error while getting container metrics, 0 otherwise"
            )
            lines.append(f"# TYPE {name} gauge")
            lines.append(f"{name} {error}")
        return "\n".join(lines) + "\n"

    def resource_metrics_route(self) -> tuple[int, str, bytes]:
        return 200, METRICS_CONTENT_TYPE, self.resource_metrics_text().encode()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _epoch(text: str) -> float:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0
