"""The kubelet's container GC for CRI pods (pkg/kubelet/kuberuntime/kuberuntime_gc.go), and the runtime's view
of which pods it holds.

`ContainerGC.collect(containers, sandboxes)`, every `period_s` (the kubelet's ContainerGCPeriod, 1 min):
  dead containers (not running, created at least `min_age_s` ago) are grouped per pod and container name
  (an evict unit) -> each unit keeps its newest `max_per_pod_container` (by attempt, then creation time) ->
  when `max_containers` is set and more dead containers are left, each unit is cut to an equal share (at
  least one) and then the oldest go first -> sandboxes that are not ready and hold no container are removed,
  all but the newest of each pod.
The defaults are the kubelet's (--maximum-dead-containers-per-container=1, --maximum-dead-containers=-1,
--minimum-container-ttl-duration=0). The dead containers of a pod that no longer exists are not the GC's:
the agent's orphan cleanup stops and removes the pod's sandboxes, which takes its containers with them, as the
kubelet's HandlePodCleanups kills runtime pods it does not know. `held_pods` names every pod that has a
sandbox or container of this node in the runtime, so that cleanup finds pods with neither record nor cgroup.
Removal itself is the caller's (`remove_container`, `remove_sandbox`), which tolerates what is gone already.
A dead container is removed, never stopped (as the kubelet's removeOldestN, which stops only a container in
the unknown state): the listing may be a moment old, and a container created then may be running now; its
RemoveContainer fails, and the next pass sees it running.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from agent.kuberuntime.cri import labels
from agent.kuberuntime.cri.client import CRIError
from kubenode.api.cri.v1 import api_pb2 as cri

log = logging.getLogger(__name__)

GC_PERIOD_S = 60.0


@dataclass(frozen=True)
class GCPolicy:
    min_age_s: float = 0.0
    max_per_pod_container: int = 1  # < 0: no limit
    max_containers: int = -1  # < 0: no limit


def newest_first(containers: Iterable[cri.Container]) -> list[cri.Container]:
    return sorted(containers, key=lambda c: (c.metadata.attempt, c.created_at), reverse=True)


def dead_containers_to_remove(
    containers: Sequence[cri.Container], policy: GCPolicy, now_ns: int
) -> list[cri.Container]:
    """The dead containers the policy removes, oldest of each unit first."""
    newest_gc_time = now_ns - int(policy.min_age_s * 1e9)
    units: dict[tuple[str, str], list[cri.Container]] = {}
    for c in containers:
        if c.state == cri.CONTAINER_RUNNING or c.created_at > newest_gc_time:
            continue
        units.setdefault((c.labels.get(labels.POD_UID, ""), c.metadata.name), []).append(c)
    kept = {key: newest_first(unit) for key, unit in units.items()}
    removed: list[cri.Container] = []

    def enforce_per_unit(limit: int) -> None:
        for key, unit in kept.items():
            removed.extend(reversed(unit[limit:]))
            kept[key] = unit[:limit]

    if policy.max_per_pod_container >= 0:
        enforce_per_unit(policy.max_per_pod_container)
    total = sum(len(unit) for unit in kept.values())
    if policy.max_containers >= 0 and total > policy.max_containers:
        enforce_per_unit(max(1, policy.max_containers // max(1, len(kept))))
        flattened = newest_first(c for unit in kept.values() for c in unit)
        removed.extend(reversed(flattened[policy.max_containers :]))
    return removed


def sandboxes_to_remove(
    sandboxes: Sequence[cri.PodSandbox], containers: Sequence[cri.Container]
) -> list[cri.PodSandbox]:
    """Sandboxes that are not ready and hold no container, except the newest of each pod."""
    in_use = {c.pod_sandbox_id for c in containers}
    by_pod: dict[str, list[cri.PodSandbox]] = {}
    for s in sandboxes:
        by_pod.setdefault(s.metadata.uid, []).append(s)
    removed: list[cri.PodSandbox] = []
    for group in by_pod.values():
        group.sort(key=lambda s: (s.metadata.attempt, s.created_at), reverse=True)
        removed.extend(s for s in group[1:] if s.state != cri.SANDBOX_READY and s.id not in in_use)
    return removed


def held_pods(sandboxes: Iterable[cri.PodSandbox], containers: Iterable[cri.Container]) -> set[str]:
    """Pod UIDs with any sandbox or container in the runtime."""
    return {s.labels[labels.POD_UID] for s in sandboxes if labels.POD_UID in s.labels} | {
        c.labels[labels.POD_UID] for c in containers if labels.POD_UID in c.labels
    }


class ContainerGC:
    def __init__(
        self,
        remove_container: Callable[[cri.Container], None],
        remove_sandbox: Callable[[str], None],
        policy: GCPolicy | None = None,
        *,
        period_s: float = GC_PERIOD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy if policy is not None else GCPolicy()
        self._remove_container = remove_container
        self._remove_sandbox = remove_sandbox
        self._period_s = period_s
        self._clock = clock
        self._last = -period_s

    def due(self) -> bool:
        return self._clock() - self._last >= self._period_s

    def collect(self, containers: Sequence[cri.Container], sandboxes: Sequence[cri.PodSandbox]) -> int:
        """One GC pass over what the runtime listed; returns how many containers and sandboxes went."""
        self._last = self._clock()
        dead = dead_containers_to_remove(containers, self.policy, time.time_ns())
        uid = labels.POD_UID
        removed = {
            c.id
            for c in dead
            if self._remove("container", c.id, c.labels.get(uid, ""), partial(self._remove_container, c))
        }
        left = [c for c in containers if c.id not in removed]
        empty = [
            s
            for s in sandboxes_to_remove(sandboxes, left)
            if self._remove("sandbox", s.id, s.metadata.uid, partial(self._remove_sandbox, s.id))
        ]
        return len(removed) + len(empty)

    def _remove(self, kind: str, ident: str, uid: str, remove: Callable[[], None]) -> bool:
        log.info("container GC: removing %s %s of pod %s", kind, ident[:12], uid)
        try:
            remove()
        except CRIError as exc:  # the next pass tries again, as the kubelet's GC does
            log.warning("container GC: removing %s %s: %s", kind, ident[:12], exc)
            return False
        return True
