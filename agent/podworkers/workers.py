"""podWorkers: one serialized worker per pod UID, following the kubelet's contract.

- `update_pod` never blocks: it records the update as the UID's *pending* update (replacing
  any earlier pending one, so a worker busy with a slow sync only ever sees the latest
  state next) and starts the UID's worker thread if none runs. The thread takes pending
  updates one after another and ends when none is left, so a pod holds a thread only while it
  has work (the kubelet's goroutine per pod, here on demand: a node of hundreds of pods, or a
  thousand hollow nodes in one process, keep few threads).
- The worker state is derived as the kubelet derives it: terminated if `terminated_at` is
  set, else terminating if `terminating_at` is set, else syncing. A pod becomes
  terminating on a kill update, a deletion timestamp or a terminal phase, and from then on
  every update is a kill; the effective grace period can only go down (floor 1 s), and
  shortening it (or starting termination) interrupts the sync in flight via its context.
- After a successful sync the pod is requeued for a resync (jittered resync interval, or
  sooner when the syncer asks, e.g. at a crash-loop backoff expiry); a failed sync is
  requeued after the jittered backoff period. The worker never retries on its own: the
  agent's loop calls `requeue_due()`, which re-delivers the last update of every due UID.
- A finished UID (terminated and cleaned up) ignores updates until `sync_known_pods`
  purges it; a create arriving while the pod is terminating marks it for restart so the
  same UID may start again afterwards (common for static pods).
- `sync_known_pods` marks every orphan (a pod no longer desired) deleted: a running one
  starts terminating, one whose worker never started is finished at once without a sync.

The syncer (podsync.PodSyncer) implements `SyncHandler`; the clock and the random source used for
jitter are injectable so tests can drive backoff and resync deterministically.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from agent.podworkers.types import (
    SyncContext,
    SyncHandler,
    SyncResult,
    UpdatePodOptions,
    UpdateType,
    WorkType,
    effective_grace_period,
)
from agent.util.workqueue import WorkQueue
from kubenode.model import Pod

log = logging.getLogger(__name__)

RESYNC_INTERVAL_S = 60.0  # the kubelet's SyncFrequency default
BACKOFF_PERIOD_S = 10.0  # the kubelet's backOffPeriod
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class _Status:
    uid: str
    terminating_at: float | None = None
    terminated_at: float | None = None
    finished: bool = False
    deleted: bool = False
    evicted: bool = False
    restart_requested: bool = False
    grace_period: int = 0
    working: bool = False
    pending: UpdatePodOptions | None = None
    active: UpdatePodOptions | None = None
    synced_at: float | None = None
    completed: list[threading.Event] = field(default_factory=list)
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def work_type(self) -> WorkType:
        if self.terminated_at is not None:
            return WorkType.TERMINATED
        if self.terminating_at is not None:
            return WorkType.TERMINATING
        return WorkType.SYNC


class PodWorkers:
    def __init__(
        self,
        syncer: SyncHandler,
        *,
        queue: WorkQueue | None = None,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
        resync_interval: float = RESYNC_INTERVAL_S,
        backoff_period: float = BACKOFF_PERIOD_S,
    ) -> None:
        self._syncer = syncer
        self._clock = clock
        self._rand = rand
        self.queue = queue if queue is not None else WorkQueue(clock)
        self.resync_interval = resync_interval
        self.backoff_period = backoff_period
        # Reentrant: `wait_for` predicates call the query methods while holding it.
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._statuses: dict[str, _Status] = {}
        self._pods_synced = False  # sync_known_pods has run at least once
        self._stopped = False

    # ----- updates ---------------------------------------------------------------------------------

    def update_pod(self, options: UpdatePodOptions) -> None:
        uid = options.pod.uid
        with self._lock:
            if self._stopped:
                return
            status = self._statuses.get(uid)
            first_time = status is None
            if status is None:
                status = self._statuses[uid] = _Status(uid)
                if options.pod.phase in TERMINAL_PHASES and options.update_type != UpdateType.KILL:
                    # First sighting of an already-terminal pod: only the terminated cleanup runs.
                    status.terminating_at = status.terminated_at = self._clock()
            if status.finished:
                if options.update_type == UpdateType.CREATE:
                    status.restart_requested = True
                if options.completed is not None:
                    options.completed.set()
                return
            became_terminating = False
            if status.terminating_at is None and (
                options.update_type == UpdateType.KILL
                or options.pod.deletion_timestamp is not None
                or options.pod.phase in TERMINAL_PHASES
            ):
                status.terminating_at = self._clock()
                became_terminating = True
                status.deleted = options.pod.deletion_timestamp is not None
                status.evicted = options.evict
            elif (
                not first_time
                and status.terminating_at is not None
                and options.update_type == UpdateType.CREATE
            ):
                # The same UID is wanted again once termination completes. Not on the first sighting (an
                # already-terminal pod after a restart, as the kubelet's `!firstTime`): that restart would
                # purge the worker and create it again at every housekeeping, cleaning the pod up each time.
                status.restart_requested = True
            if status.terminating_at is not None:
                status.evicted = status.evicted or options.evict
                grace, shortened = effective_grace_period(
                    status.grace_period, options.pod, options.grace_period_override
                )
                status.grace_period = grace
                if became_terminating or shortened:
                    status.cancel.set()  # interrupt the sync in flight
                if options.completed is not None:
                    if status.terminated_at is not None:
                        options.completed.set()  # termination already completed; nothing will set it later
                    else:
                        status.completed.append(options.completed)
                options = replace(options, update_type=UpdateType.KILL)
            status.pending = options
            self._ensure_worker(status)

    def _ensure_worker(self, status: _Status) -> None:
        if status.thread is None or not status.thread.is_alive():
            status.thread = threading.Thread(
                target=self._worker_loop, args=(status,), name=f"pod-{status.uid[:8]}", daemon=True
            )
            status.thread.start()

    def requeue_due(self) -> list[str]:
        """Re-deliver the last update of every UID whose requeue time has come (the kubelet's sync ticker)."""
        delivered = []
        for uid in self.queue.get_work():
            with self._lock:
                status = self._statuses.get(uid)
                if status is None or status.finished or status.active is None or self._stopped:
                    continue
                if status.pending is None:
                    kind = UpdateType.KILL if status.terminating_at is not None else UpdateType.SYNC
                    status.pending = replace(status.active, update_type=kind, completed=None)
                self._ensure_worker(status)
                delivered.append(uid)
        return delivered

    def sync_known_pods(self, desired: Iterable[Pod]) -> dict[str, WorkType]:
        """Purge finished workers that are no longer wanted (or wanted anew); drive orphans to the end.

        As the kubelet's removeTerminatedWorker: every orphan counts as deleted; one whose worker
        never started is finished at once without any sync (nothing can run for it), one still
        running starts terminating with the grace of its last spec."""
        wanted = {pod.uid for pod in desired}
        result: dict[str, WorkType] = {}
        with self._lock:
            self._pods_synced = True
            for uid, status in list(self._statuses.items()):
                orphan = uid not in wanted
                if orphan and not status.finished:
                    status.deleted = True
                    if status.active is None:
                        self._finish_unstarted(status)
                    elif status.terminating_at is None:
                        self._terminate_orphan(status, status.active)
                if (orphan or status.restart_requested) and status.finished:
                    del self._statuses[uid]
                    self.queue.forget(uid)
                    continue
                result[uid] = status.work_type()
        return result

    def _finish_unstarted(self, status: _Status) -> None:
        """The kubelet's cleanupUnstartedPod; called under the lock, while the worker holds no update."""
        now = self._clock()
        if status.terminating_at is None:
            status.terminating_at = now
        status.terminated_at = now
        status.finished = True
        status.pending = None
        for event in status.completed:
            event.set()
        status.completed.clear()
        self._changed.notify_all()

    def _terminate_orphan(self, status: _Status, last: UpdatePodOptions) -> None:
        status.terminating_at = self._clock()
        status.grace_period = status.grace_period or max(1, last.pod.termination_grace_period_seconds)
        status.cancel.set()
        if status.pending is None:
            status.pending = replace(last, update_type=UpdateType.KILL)
        self._ensure_worker(status)

    # ----- queries ---------------------------------------------------------------------------------

    def work_type(self, uid: str) -> WorkType | None:
        with self._lock:
            status = self._statuses.get(uid)
            return status.work_type() if status else None

    def is_finished(self, uid: str) -> bool:
        with self._lock:
            status = self._statuses.get(uid)
            return status is not None and status.finished

    def is_finished_or_gone(self, uid: str) -> bool:
        """True once the UID's worker has finished, or has been purged (purging needs finishing first)."""
        with self._lock:
            status = self._statuses.get(uid)
            return status is None or status.finished

    def is_termination_requested(self, uid: str) -> bool:
        with self._lock:
            status = self._statuses.get(uid)
            return status is not None and status.terminating_at is not None

    def grace_period(self, uid: str) -> int | None:
        with self._lock:
            status = self._statuses.get(uid)
            return status.grace_period if status and status.terminating_at is not None else None

    def should_pod_content_be_removed(self, uid: str) -> bool:
        """The kubelet's ShouldPodContentBeRemoved: evicted, or deleted (orphans count) and
        terminated; an unknown pod only once sync_known_pods has run."""
        with self._lock:
            status = self._statuses.get(uid)
            if status is None:
                return self._pods_synced
            return status.evicted or (status.deleted and status.terminated_at is not None)

    def known_uids(self) -> list[str]:
        with self._lock:
            return list(self._statuses)

    def wait_idle(self, uid: str, timeout: float) -> bool:
        """Wait until the UID's worker has nothing pending or in flight (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                status = self._statuses.get(uid)
                if status is None or (not status.working and status.pending is None):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until `predicate()` (evaluated under the workers' lock after every change) holds.

        The predicate may call this object's queries (the lock is reentrant) but must take no other
        lock: the agent takes its own lock first and then this one, so the reverse order deadlocks.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
            return True

    # ----- the worker ------------------------------------------------------------------------------

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopped = True
            statuses = list(self._statuses.values())
            for status in statuses:
                status.cancel.set()
        for status in statuses:
            thread = status.thread  # read once: the worker clears it as it ends
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)

    def _worker_loop(self, status: _Status) -> None:
        while True:
            with self._lock:
                if self._stopped or status.finished:
                    return
                update = status.pending
                if update is None:
                    # Nothing to do: the thread ends, and the next update starts another (under this
                    # lock, so none is missed). A pod that is not syncing holds no thread, so a node's
                    # threads follow its syncs in flight rather than its pods (hollow nodes: thousands).
                    status.thread = None
                    return
                status.pending = None
                status.active = update
                status.working = True
                status.cancel = threading.Event()
                work = status.work_type()
                ctx = SyncContext(status.cancel, functools.partial(self._grace_of, status))
            result, error = SyncResult(), None
            try:
                if work == WorkType.TERMINATED:
                    self._syncer.sync_terminated_pod(update.pod, ctx)
                elif work == WorkType.TERMINATING:
                    self._syncer.sync_terminating_pod(update.pod, ctx)
                else:
                    result = self._syncer.sync_pod(update.update_type, update.pod, ctx)
            except Exception as exc:
                error = exc
                log.warning("%s of pod %s (%s) failed: %s", work, update.pod.key, status.uid, exc)
            self._complete(status, work, result, error)
            if status.finished:
                return

    def _grace_of(self, status: _Status) -> int:
        with self._lock:
            if status.grace_period:
                return status.grace_period
            spec_grace = status.active.pod.termination_grace_period_seconds if status.active else 1
            return max(1, spec_grace)

    def _complete(self, status: _Status, work: WorkType, result: SyncResult, error: Exception | None) -> None:
        with self._lock:
            now = self._clock()
            status.working = False
            requeue_now = False
            if error is not None:
                self.queue.enqueue(status.uid, self._jitter(self.backoff_period))
            elif work == WorkType.SYNC:
                status.synced_at = now
                if result.terminal and status.terminating_at is None and status.active is not None:
                    status.terminating_at = now
                    status.grace_period, _ = effective_grace_period(
                        status.grace_period, status.active.pod, None
                    )
                    requeue_now = True
                else:
                    delay = self._jitter(self.resync_interval)
                    if result.requeue_after is not None:
                        delay = min(delay, result.requeue_after)
                    self.queue.enqueue(status.uid, delay)
            elif work == WorkType.TERMINATING:
                status.terminated_at = now
                for event in status.completed:
                    event.set()
                status.completed.clear()
                requeue_now = True
            else:
                status.finished = True
                self.queue.forget(status.uid)
            if requeue_now and status.pending is None and status.active is not None:
                status.pending = replace(status.active, update_type=UpdateType.KILL, completed=None)
            self._changed.notify_all()  # the worker's loop takes a pending update next

    def _jitter(self, period: float) -> float:
        return period + self._rand() * 0.5 * period
