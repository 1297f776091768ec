"""The eviction manager (the kubelet's pkg/kubelet/eviction): the node guards itself against its pods.

Every `period` seconds (the kubelet's evictionMonitoringPeriod, 10 s) `synchronize`:
1. evicts pods over their own ephemeral-storage limits (the pod's total, a container's, an emptyDir's
   sizeLimit), with kube's messages; if it evicted any, that is this round's work;
2. observes the signals (signals.py) and finds the thresholds met: a hard one at once, a soft one once met
   for its grace period; a threshold met before stays met until available exceeds it by its minimum reclaim;
3. turns them into node conditions (MemoryPressure, DiskPressure, PIDPressure), each kept true for the
   pressure transition period after it was last observed, which the node status reports;
4. for the first threshold met (memory first), reclaims what the node can without evicting (for disk: the
   logs of containers that are no longer running) and observes again;
5. if still met, ranks the pods as the kubelet does (memory, disk: usage over requests first, then lower
   priority, then usage above requests; pids: lower priority, then more processes) and evicts the first
   non-critical one: phase Failed, reason Evicted, kube's message and an Evicted event. One pod per round.
Critical pods (static, mirror, or priority at least system-critical) are never evicted, as in the kubelet.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent.eviction.signals import Observation
from agent.eviction.thresholds import Threshold
from agent.util.background import BackgroundLoop
from kubenode.model import Pod
from kubenode.model.quantity import format_amount

log = logging.getLogger(__name__)

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
CONDITION_OF = {
    "memory.available": "MemoryPressure",
    "allocatableMemory.available": "MemoryPressure",
    "nodefs.available": "DiskPressure",
    "nodefs.inodesFree": "DiskPressure",
    "imagefs.available": "DiskPressure",
    "imagefs.inodesFree": "DiskPressure",
    "pid.available": "PIDPressure",
}
RESOURCE_OF = {
    "memory.available": "memory",
    "allocatableMemory.available": "memory",
    "nodefs.available": "ephemeral-storage",
    "nodefs.inodesFree": "inodes",
    "imagefs.available": "ephemeral-storage",
    "imagefs.inodesFree": "inodes",
    "pid.available": "pids",
}


@dataclass
class PodUsage:
    """What one pod uses now, as the eviction manager ranks and judges it."""

    pod: Pod
    memory: int = 0  # working set, bytes
    disk: int = 0  # logs and writable volumes, bytes
    processes: int = 0
    critical: bool = False
    # container -> its own ephemeral-storage use (its logs); volume name -> (use, emptyDir sizeLimit)
    container_disk: dict[str, int] = field(default_factory=dict)
    empty_dirs: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    # What the target has read so far (see EvictionTarget.measure): the storage figures, the memory and
    # process figures; a pod whose cgroup is not made yet uses nothing, and nothing is read for it.
    placed: bool = True
    storage_read: bool = False
    live_read: bool = False


class EvictionTarget(Protocol):
    def eviction_candidates(self) -> list[PodUsage]:
        """Every active pod, with the storage figures read of the pods that have a limit to be held to
        (ephemeral-storage, an emptyDir's sizeLimit): what a round always checks."""

    def measure(self, candidates: Sequence[PodUsage], resource: str) -> None:
        """Read what ranking the candidates by `resource` (RESOURCE_OF's) needs, where not read yet: only
        a round with a threshold to act on ranks, so a quiet node reads no pod's memory or processes."""

    def evict_pod(self, pod: Pod, message: str, grace_override: int | None) -> None: ...

    def reclaim_dead_container_logs(self) -> int: ...


def _requests(pod: Pod, resource: str) -> int:
    return sum(c.requests.get(resource, 0) for c in pod.containers)


def _limits(pod: Pod, resource: str) -> int | None:
    limits = [c.limits.get(resource) for c in pod.containers]
    return None if any(limit is None for limit in limits) or not limits else sum(int(x or 0) for x in limits)


def _rank(signal: str, pods: list[PodUsage]) -> list[PodUsage]:
    if signal == "pid.available":
        return sorted(pods, key=lambda u: (u.pod.priority, -u.processes))
    resource = "memory" if RESOURCE_OF[signal] == "memory" else "ephemeral-storage"

    def usage(u: PodUsage) -> int:
        return u.memory if resource == "memory" else u.disk

    return sorted(
        pods,
        key=lambda u: (
            not usage(u) > _requests(u.pod, resource),  # exceeding requests first
            u.pod.priority,
            -(usage(u) - _requests(u.pod, resource)),
        ),
    )


class EvictionManager(BackgroundLoop):
    thread_name = "eviction"

    def __init__(
        self,
        target: EvictionTarget,
        thresholds: Sequence[Threshold],
        observe: Callable[[Sequence[PodUsage]], Mapping[str, Observation]],
        *,
        period: float = 10.0,
        transition_period: float = 300.0,
        max_pod_grace_period: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.target = target
        self.thresholds = list(thresholds)
        self._observe = observe
        self.period = period
        self.transition_period = transition_period
        self.max_pod_grace_period = max_pod_grace_period
        self._clock = clock
        self._lock = threading.Lock()
        self._first_observed: dict[Threshold, float] = {}
        self._last_met: list[Threshold] = []
        self._condition_seen: dict[str, float] = {}
        self._reported: dict[str, bool] = {}
        self.evictions = 0
        self.on_change: Callable[[], None] | None = None  # told when a pressure condition turns

    def pressure(self) -> dict[str, bool]:
        """MemoryPressure, DiskPressure and PIDPressure for the node status."""
        now = self._clock()
        with self._lock:
            return {
                condition: now - seen < self.transition_period
                for condition, seen in self._condition_seen.items()
            }

    def _met(self, observations: Mapping[str, Observation]) -> list[Threshold]:
        met = []
        for threshold in self.thresholds:
            seen = observations.get(threshold.signal)
            if seen is None:
                continue
            target = (
                threshold.reclaim_target(seen.capacity)
                if threshold in self._last_met
                else threshold.value(seen.capacity)
            )
            if seen.available < target:
                met.append(threshold)
        return met

    def synchronize(self) -> Pod | None:
        """One round; returns the pod evicted, if any."""
        candidates = self.target.eviction_candidates()
        evicted = self._local_storage_evictions(candidates)
        if evicted is not None:
            return evicted
        now = self._clock()
        observations = self._observe(candidates)
        met = self._met(observations)
        with self._lock:
            self._first_observed = {t: self._first_observed.get(t, now) for t in met}
            self._last_met = met
            for threshold in met:
                self._condition_seen[CONDITION_OF[threshold.signal]] = now
        pressure = self.pressure()
        if pressure != self._reported:
            self._reported = pressure
            if self.on_change is not None:
                self.on_change()
        acting = [t for t in met if now - self._first_observed[t] >= t.grace_period]
        if not acting:
            return None
        acting.sort(key=lambda t: CONDITION_OF[t.signal] != "MemoryPressure")  # memory first
        threshold = acting[0]
        if CONDITION_OF[threshold.signal] == "DiskPressure" and self.target.reclaim_dead_container_logs():
            observations = self._observe(candidates)
            if threshold not in self._met(observations):
                log.info("eviction: reclaimed enough for %s without evicting a pod", threshold)
                return None
        seen = observations[threshold.signal]
        self.target.measure(candidates, RESOURCE_OF[threshold.signal])
        for usage in _rank(threshold.signal, [u for u in candidates if not u.critical]):
            message = self._message(threshold, seen, usage)
            grace = 0 if not threshold.soft else (self.max_pod_grace_period or None)
            self._evict(usage.pod, message, grace)
            return usage.pod
        return None

    def _message(self, threshold: Threshold, seen: Observation, usage: PodUsage) -> str:
        resource = RESOURCE_OF[threshold.signal]
        message = f"The node was low on resource: {resource}. "
        amount_resource = "memory" if resource in ("memory", "ephemeral-storage") else "pods"
        message += (
            f"Threshold quantity: {format_amount(amount_resource, threshold.value(seen.capacity))}, "
            f"available: {format_amount(amount_resource, seen.available)}. "
        )
        if resource == "memory" and usage.memory > _requests(usage.pod, "memory"):
            for c in usage.pod.containers:
                request = format_amount("memory", c.requests.get("memory", 0))
                message += (
                    f"Container {c.name} was using {format_amount('memory', usage.memory)}, request is "
                    f"{request}, has larger consumption of memory. "
                )
                break  # containers share the pod cgroup: one figure for the pod
        return message

    def _local_storage_evictions(self, candidates: list[PodUsage]) -> Pod | None:
        """Pods over their own ephemeral-storage limits go first, whatever the node's pressure."""
        evicted = None
        for usage in candidates:
            if usage.critical:
                continue
            message = ""
            for name, (used, limit) in sorted(usage.empty_dirs.items()):
                if limit is not None and used > limit:
                    amount = format_amount("memory", limit)
                    message = f"Usage of EmptyDir volume {name!r} exceeds the limit {amount!r}. "
                    break
            total_limit = _limits(usage.pod, "ephemeral-storage")
            if not message and total_limit is not None and usage.disk > total_limit:
                message = (
                    "Pod ephemeral local storage usage exceeds the total limit of containers "
                    f"{format_amount('memory', total_limit)}. "
                )
            for c in usage.pod.containers:
                limit = c.limits.get("ephemeral-storage")
                if not message and limit is not None and usage.container_disk.get(c.name, 0) > limit:
                    message = (
                        f"Container {c.name} exceeded its local ephemeral storage limit "
                        f"{format_amount('memory', limit)!r}. "
                    )
            if message:
                self._evict(usage.pod, message, 0)
                evicted = usage.pod
        return evicted

    def _evict(self, pod: Pod, message: str, grace: int | None) -> None:
        log.warning("eviction: evicting pod %s: %s", pod.key, message.strip())
        self.target.evict_pod(pod, message.strip(), grace)
        self.evictions += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.synchronize()
            except Exception:  # the node's guard must not die with one bad round
                log.exception("eviction manager round")
            self._wake.wait(self.period)
            self._wake.clear()
