"""The scheduling queue, as kube-scheduler keeps it.

- activeQ: pods to try now, highest `spec.priority` first, then earliest queue time.
- backoffQ: pods waiting out their backoff, `initial * 2^(attempts-1)` capped at the
  maximum (1 s doubling to 10 s by default), counted from their last failure.
- unschedulable: pods found unschedulable, parked until a cluster event that may help
  them (the engine decides which) or until they have waited 5 minutes.

A pod that failed while a cluster event arrived during its scheduling cycle goes to
backoffQ instead of the unschedulable set, so the event is not lost. All time comes
from an injected clock.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kubenode.model.objects import Pod
from scheduler.clock import Clock

MAX_UNSCHEDULABLE_SECONDS = 300.0

# What kube's isPodUpdated strips before comparing: the status (phase, nominatedNodeName,
# startTime), plus where the object was read from and its raw form. (It also strips
# resourceVersion, generation, managedFields and finalizers, which Pod does not keep.)
# Every other field, including any added to Pod later, counts as an update.
_NOT_SCHEDULING_INPUTS = frozenset({"phase", "nominated_node_name", "start_time", "source", "raw"})
_SCHEDULING_INPUTS = tuple(f.name for f in dataclasses.fields(Pod) if f.name not in _NOT_SCHEDULING_INPUTS)


def is_pod_updated(old: Pod, new: Pod) -> bool:
    """Whether new differs from old in what scheduling may depend on (spec and metadata)."""
    return any(getattr(old, name) != getattr(new, name) for name in _SCHEDULING_INPUTS)


@dataclass
class QueuedPod:
    pod: Pod
    timestamp: float  # when it (re)entered the queue: the activeQ tie-break
    attempts: int = 0
    last_failure: float = 0.0
    unschedulable_since: float = 0.0
    # Filter plugins that rejected the pod on some node in its last attempt.
    rejected_by: frozenset[str] = frozenset()
    cycle: int = 0  # the scheduling cycle of its last pop
    # When it first entered the queue (never reset): the start of the scheduling SLI.
    added: float = 0.0
    popped: float = 0.0  # when its current attempt began
    seq: int = field(default=0)  # bumps on every move; stale heap entries are skipped

    @property
    def key(self) -> str:
        return self.pod.key


class SchedulingQueue:
    def __init__(
        self,
        clock: Clock,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable: float = MAX_UNSCHEDULABLE_SECONDS,
    ) -> None:
        self._clock = clock
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._max_unschedulable = max_unschedulable
        self._active_heap: list[tuple[int, float, int, str]] = []
        self._backoff_heap: list[tuple[float, int, str]] = []
        self._active: dict[str, QueuedPod] = {}
        self._backoff: dict[str, QueuedPod] = {}
        self._unschedulable: dict[str, QueuedPod] = {}
        self._in_flight: dict[str, QueuedPod] = {}
        self._seq = itertools.count(1)
        self.scheduling_cycle = 0
        self._move_request_cycle = -1

    # --- inspection -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._unschedulable)

    def where(self, key: str) -> str | None:
        """ "active", "backoff", "unschedulable", "in-flight" or None."""
        for name, table in (
            ("active", self._active),
            ("backoff", self._backoff),
            ("unschedulable", self._unschedulable),
            ("in-flight", self._in_flight),
        ):
            if key in table:
                return name
        return None

    def counts(self) -> dict[str, int]:
        """Pods per queue, as kube-scheduler's scheduler_pending_pods{queue} reports them."""
        return {
            "active": len(self._active),
            "backoff": len(self._backoff),
            "unschedulable": len(self._unschedulable),
        }

    def get(self, key: str) -> QueuedPod | None:
        for table in (self._active, self._backoff, self._unschedulable, self._in_flight):
            if key in table:
                return table[key]
        return None

    def unschedulable_pods(self) -> Iterator[QueuedPod]:
        return iter(list(self._unschedulable.values()))

    def backoff_duration(self, attempts: int) -> float:
        if attempts <= 0:
            return 0.0
        # Double step by step, as kube does, rather than 2**(attempts-1): a pod retried
        # some thousand times would overflow the float power and stop the scheduler.
        duration = self._initial_backoff
        for _ in range(attempts - 1):
            if duration >= self._max_backoff:
                break
            duration *= 2
        return float(min(duration, self._max_backoff))

    def backoff_expiry(self, qp: QueuedPod) -> float:
        return qp.last_failure + self.backoff_duration(qp.attempts)

    def next_backoff_expiry(self) -> float | None:
        while self._backoff_heap:
            expiry, seq, key = self._backoff_heap[0]
            qp = self._backoff.get(key)
            if qp is not None and qp.seq == seq:
                return expiry
            heapq.heappop(self._backoff_heap)
        return None

    # --- moves ------------------------------------------------------------------------
    def _detach(self, key: str) -> QueuedPod | None:
        for table in (self._active, self._backoff, self._unschedulable):
            qp = table.pop(key, None)
            if qp is not None:
                return qp
        return None

    def _to_active(self, qp: QueuedPod) -> None:
        qp.seq = next(self._seq)
        self._active[qp.key] = qp
        heapq.heappush(self._active_heap, (-qp.pod.priority, qp.timestamp, qp.seq, qp.key))

    def _to_backoff(self, qp: QueuedPod) -> None:
        qp.seq = next(self._seq)
        self._backoff[qp.key] = qp
        heapq.heappush(self._backoff_heap, (self.backoff_expiry(qp), qp.seq, qp.key))

    def _requeue(self, qp: QueuedPod) -> None:
        """activeQ if its backoff is over, else backoffQ."""
        if self.backoff_expiry(qp) > self._clock.now():
            self._to_backoff(qp)
        else:
            self._to_active(qp)

    def add(self, pod: Pod) -> None:
        """A new pending pod goes straight to activeQ; a known one is updated in place."""
        if self.update(pod):
            return
        now = self._clock.now()
        self._to_active(QueuedPod(pod, timestamp=now, added=now))

    def update(self, pod: Pod) -> bool:
        """Replace a queued pod's object; an unschedulable pod whose spec or metadata changed
        is retried (a status-only change, e.g. its nomination, leaves it parked).
        Returns False if the pod is not queued."""
        qp = self.get(pod.key)
        if qp is None:
            return False
        changed = is_pod_updated(qp.pod, pod)
        qp.pod = pod
        if self._active.get(pod.key) is qp:
            self._to_active(qp)  # its priority may have changed: re-push, the old entry goes stale
        elif changed and self._unschedulable.get(pod.key) is qp:
            del self._unschedulable[pod.key]
            self._requeue(qp)
        return True

    def delete(self, key: str) -> None:
        self._detach(key)
        self._in_flight.pop(key, None)

    def pop(self) -> QueuedPod | None:
        """The next pod to schedule, or None if activeQ is empty. Starts a scheduling cycle."""
        while self._active_heap:
            _, _, seq, key = heapq.heappop(self._active_heap)
            qp = self._active.get(key)
            if qp is None or qp.seq != seq:
                continue
            del self._active[key]
            self.scheduling_cycle += 1
            qp.attempts += 1
            qp.cycle = self.scheduling_cycle
            qp.popped = self._clock.now()
            self._in_flight[key] = qp
            return qp
        return None

    def done(self, key: str) -> None:
        """The pod was scheduled (assumed); it leaves the queue."""
        self._in_flight.pop(key, None)

    def add_unschedulable(self, qp: QueuedPod, rejected_by: frozenset[str]) -> None:
        """After a failed attempt: backoffQ if a cluster event came during the pod's cycle,
        else the unschedulable set."""
        if self._in_flight.pop(qp.key, None) is None:
            return  # deleted while being scheduled
        now = self._clock.now()
        qp.last_failure = now
        qp.timestamp = now
        qp.rejected_by = rejected_by
        if self._move_request_cycle >= qp.cycle:
            self._to_backoff(qp)
        else:
            qp.seq = next(self._seq)
            qp.unschedulable_since = now
            self._unschedulable[qp.key] = qp

    def add_error(self, qp: QueuedPod) -> None:
        """After an error (e.g. binding failed): always backoffQ."""
        self._in_flight.pop(qp.key, None)
        now = self._clock.now()
        qp.last_failure = now
        qp.timestamp = now
        self._to_backoff(qp)

    def move_all(self, relevant: Callable[[QueuedPod], bool]) -> int:
        """A cluster event: unschedulable pods it may help go to activeQ (or backoffQ while
        backing off). Returns how many moved."""
        self._move_request_cycle = self.scheduling_cycle
        moved = [qp for qp in self._unschedulable.values() if relevant(qp)]
        for qp in moved:
            del self._unschedulable[qp.key]
            self._requeue(qp)
        return len(moved)

    def activate(self, key: str) -> None:
        """Move one parked pod to activeQ now (e.g. its nomination was cleared)."""
        qp = self._unschedulable.pop(key, None) or self._backoff.pop(key, None)
        if qp is not None:
            self._to_active(qp)

    def flush_backoff_completed(self) -> None:
        now = self._clock.now()
        while self._backoff_heap and self._backoff_heap[0][0] <= now:
            _, seq, key = heapq.heappop(self._backoff_heap)
            qp = self._backoff.get(key)
            if qp is not None and qp.seq == seq:
                del self._backoff[key]
                self._to_active(qp)

    def flush_unschedulable_leftover(self) -> None:
        now = self._clock.now()
        stale = [
            qp
            for qp in self._unschedulable.values()
            if now - qp.unschedulable_since > self._max_unschedulable
        ]
        for qp in stale:
            del self._unschedulable[qp.key]
            self._requeue(qp)
