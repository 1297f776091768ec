"""The node as the eviction manager (agent/eviction) sees it: its pods' usage, the signals, and how a pod is
evicted (the kubelet's evictPod: the pod fails with reason Evicted, then its worker kills it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence

from agent.apis.config import AgentConfig
from agent.cm.cgroups import CgroupError
from agent.cm.containermanager import ContainerManager
from agent.container.podrecord import RecordStore, RecordWriteError
from agent.container.runtime import PodRuntime
from agent.eviction.manager import PodUsage
from agent.eviction.podusage import measure, pod_usage, reclaim_dead_logs
from agent.eviction.signals import Observation, observe
from agent.pod.podtable import PodTable
from agent.podworkers.types import UpdatePodOptions, UpdateType
from agent.podworkers.workers import PodWorkers
from kubenode.model import Pod


class NodeEvictionTarget:
    """Implements the eviction manager's EvictionTarget, and reads its signals (`observe_signals`)."""

    def __init__(
        self,
        config: AgentConfig,
        table: PodTable,
        cm: ContainerManager,
        runtime: PodRuntime,
        store: RecordStore,
        workers: PodWorkers,
        *,
        base_allocatable: Mapping[str, int],
        allocatable: Callable[[], dict[str, int]],
        active_pods: Callable[[], list[Pod]],
    ) -> None:
        self.config = config
        self.table = table
        self.cm = cm
        self.runtime = runtime
        self.store = store
        self.workers = workers
        self._base_allocatable = base_allocatable
        self._allocatable = allocatable
        self._active_pods = active_pods

    def observe_signals(self, candidates: Sequence[PodUsage]) -> dict[str, Observation]:
        # The pods' working set is the kubepods cgroup's, as the kubelet reads it: one read, not one per pod.
        allocatable = self._allocatable()
        return observe(
            self.config.state_dir,
            self._base_allocatable.get("memory", 0),
            allocatable.get("memory", 0),
            self._pods_working_set,
        )

    def _pods_working_set(self) -> int:
        try:
            return self.cm.cgroups.pods_memory_working_set()
        except (CgroupError, OSError, ValueError):
            return 0  # no kubepods cgroup (yet): no pod uses anything

    def eviction_candidates(self) -> list[PodUsage]:
        with self.table.lock:
            placed = {uid for uid, record in self.table.records.items() if record.cgroup}
        return [
            pod_usage(
                pod,
                self.cm.cgroups,
                self.runtime.pod_logs_dir(pod.namespace, pod.name, pod.uid),
                self.config.state_dir,
                placed=pod.uid in placed,
            )
            for pod in self._active_pods()
        ]

    def measure(self, candidates: Sequence[PodUsage], resource: str) -> None:
        for usage in candidates:
            pod = usage.pod
            logs_dir = self.runtime.pod_logs_dir(pod.namespace, pod.name, pod.uid)
            measure(usage, resource, self.cm.cgroups, logs_dir, self.config.state_dir)

    def evict_pod(self, pod: Pod, message: str, grace_override: int | None) -> None:
        """The kubelet's evictPod: the pod fails with reason Evicted, then is killed (the status manager
        records the Evicted event with the message)."""
        with self.table.lock:
            record = self.table.records.get(pod.uid)
            if record is not None:
                record.phase, record.reason, record.message = "Failed", "Evicted", message
        if record is not None:
            with contextlib.suppress(RecordWriteError):
                self.store.save(record)
        self.workers.update_pod(
            UpdatePodOptions(UpdateType.KILL, pod, grace_period_override=grace_override, evict=True)
        )

    def reclaim_dead_container_logs(self) -> int:
        with self.table.lock:
            records = list(self.table.records.values())
        return reclaim_dead_logs(records)
