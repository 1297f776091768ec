"""The probe manager: every container's probes on one scheduler thread and a small, fixed pool.

Flow: the agent hands each synced pod to `add_pod` (a worker per probe not yet known: agent/prober/worker.py)
and each finished pod to `remove_pod`. The scheduler thread keeps one heap of (next tick, worker); at a tick
the worker decides (`prepare`) from its container's current state (`lookup`, the agent's record) whether to
probe; a probe runs on the pool (`handlers.run_probe`), at most one per worker at a time (a probe slower
than its period skips ticks, as the kubelet's ticker does), and its result goes back through the worker's
thresholds (`record`). So the cost is one thread plus `pool_size` threads whatever the number of probes.

What changes is told: a readiness or startup result change to `on_change(uid)` (the status manager writes
the pod's ready/started and its conditions), a liveness or startup failure to `on_unhealthy(uid)` (the agent
syncs the pod, which kills the container and restarts it under the restart policy); each failed probe
becomes an `Unhealthy` event and a redirect not followed a `ProbeWarning`, with the kubelet's messages
(`events`); each probe's result is counted (`count`: prober_probe_total). A probe that cannot run
(a port name the container does not declare) is an `Unhealthy` "errored" event and leaves the result as it
was, as in the kubelet. `status(uid, container, running)` answers (started, ready) for the pod's status.
The clock and the executor are injectable: tests step `run_due(now)` by hand.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor

from agent.container.execresult import ExecRunner
from agent.prober.handlers import Outcome, ProbeError, Result, run_probe
from agent.prober.spec import ProbeSpec, ProbeType, probes_of
from agent.prober.worker import ContainerView, ProbeWorker, Verdict
from kubenode.model import Pod

log = logging.getLogger(__name__)

POOL_SIZE = 8
WorkerKey = tuple[str, str, ProbeType]
# (pod, container, event type, reason, message)
EventSink = Callable[[Pod, str, str, str, str], None]
# (probe, pod, result label: successful | failed | unknown); result None: forget the probe's series
CountSink = Callable[[ProbeSpec, Pod, str | None], None]


class ProbeManager:
    def __init__(
        self,
        lookup: Callable[[str, str], ContainerView | None],
        exec_runner: Callable[[Pod, str], ExecRunner],
        *,
        host_ip: str = "127.0.0.1",
        clock: Callable[[], float] = time.monotonic,
        executor: Executor | None = None,
    ) -> None:
        self._lookup = lookup
        self._exec_runner = exec_runner
        self.host_ip = host_ip
        self._clock = clock
        self._executor = executor
        self._own_executor = executor is None
        self.on_change: Callable[[str], None] = lambda uid: None
        self.on_unhealthy: Callable[[str], None] = lambda uid: None
        self.events: EventSink | None = None
        self.count: CountSink | None = None
        self._lock = threading.Lock()
        self._workers: dict[WorkerKey, ProbeWorker] = {}
        self._by_pod: dict[str, set[WorkerKey]] = {}
        self._heap: list[tuple[float, int, WorkerKey]] = []
        self._seq = itertools.count()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ----- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="prober")
        self._thread = threading.Thread(target=self._loop, name="prober", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._own_executor and isinstance(self._executor, ThreadPoolExecutor):
            self._executor.shutdown(wait=False, cancel_futures=True)

    # ----- pods --------------------------------------------------------------------------------------

    def add_pod(self, pod: Pod) -> None:
        """Start a worker for each probe of the pod that has none (idempotent; called after every sync)."""
        with self._lock:
            if pod.uid in self._by_pod and self._workers_current(pod):
                return
            now = self._clock()
            added = False
            for spec in probes_of(pod):
                worker = self._workers.get(spec.key)
                if worker is not None:
                    worker.pod = pod  # a newer spec of the same pod (deletion timestamp, readiness gates)
                    continue
                self._workers[spec.key] = ProbeWorker(spec, pod)
                self._by_pod.setdefault(pod.uid, set()).add(spec.key)
                heapq.heappush(self._heap, (now, next(self._seq), spec.key))
                added = True
        if added:  # a pod without probes (most) wakes no one: this runs after every sync
            self._wake.set()

    def _workers_current(self, pod: Pod) -> bool:
        keys = self._by_pod.get(pod.uid, set())
        if not keys:
            return False
        for key in keys:
            self._workers[key].pod = pod
        return True

    def remove_pod(self, uid: str) -> None:
        """Stop every probe of the pod (terminated, deleted, or an orphan): nothing runs for it afterwards."""
        with self._lock:
            keys = self._by_pod.pop(uid, set())
            removed = [self._workers.pop(key) for key in keys if key in self._workers]
        for worker in removed:
            self._count(worker, None)

    def probe_count(self) -> int:
        """Probes still scheduled (a stopped one is kept, unscheduled, for its last result)."""
        with self._lock:
            return sum(not w.stopped for w in self._workers.values())

    # ----- what the status and the runtime ask ------------------------------------------------------

    def status(self, uid: str, container: str, running: bool) -> tuple[bool, bool]:
        """(started, ready) of a container as the kubelet's UpdatePodStatus computes them."""
        if not running:
            return False, False
        with self._lock:
            started = self._started_locked(uid, container)
            readiness = self._workers.get((uid, container, ProbeType.READINESS))
            return started, started and (readiness is None or readiness.result is True)

    def failed_probe(self, uid: str, container: str, container_id: str) -> ProbeSpec | None:
        """The liveness or startup probe whose failure means this container (by ID: not a restarted
        one) must be killed, if any."""
        with self._lock:
            for kind in (ProbeType.LIVENESS, ProbeType.STARTUP):
                worker = self._workers.get((uid, container, kind))
                if worker is not None and worker.result is False and worker.container_id == container_id:
                    return worker.spec
        return None

    def has_probes(self, uid: str) -> bool:
        with self._lock:
            return bool(self._by_pod.get(uid))

    # ----- the scheduler -----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                wait: float | None = self.run_due(self._clock())
                with self._lock:
                    if not self._heap:
                        wait = None  # no probe scheduled: asleep until add_pod (or stop) rings
            except Exception:  # the probes must outlive any one bad tick
                log.exception("prober tick failed")
                wait = 1.0
            self._wake.wait(wait)
            self._wake.clear()

    def run_due(self, now: float) -> float:
        """Tick every worker that is due; returns the seconds until the next one is (at most 1)."""
        due: list[ProbeWorker] = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                at, _, key = heapq.heappop(self._heap)
                worker = self._workers.get(key)
                if worker is None or worker.stopped:
                    continue  # removed or stopped meanwhile
                period = worker.spec.period
                heapq.heappush(self._heap, (max(at + period, now), next(self._seq), key))
                if not worker.in_flight:
                    due.append(worker)
            next_at = self._heap[0][0] if self._heap else now + 1.0
        for worker in due:
            self._tick(worker, now)
        return max(0.0, min(1.0, next_at - now))

    def _tick(self, worker: ProbeWorker, now: float) -> None:
        spec = worker.spec
        view = self._lookup(spec.pod_uid, spec.container)
        with self._lock:
            if self._workers.get(spec.key) is not worker:
                return
            started = self._started_locked(spec.pod_uid, spec.container)
            before = worker.result
            verdict = worker.prepare(view, started, now)
            changed = worker.result != before
            if verdict == Verdict.STOP:
                # Unscheduled but kept until remove_pod: its last result (not ready) stays the container's,
                # where a missing worker would read as "no probe", that is ready.
                worker.stopped = True
            elif verdict == Verdict.RUN:
                worker.in_flight = True
        if changed and spec.kind != ProbeType.LIVENESS:
            self.on_change(spec.pod_uid)
        if verdict != Verdict.RUN:
            return
        executor = self._executor
        if executor is None:
            self._probe(worker, worker.container_id)
            return
        try:
            executor.submit(self._probe, worker, worker.container_id)
        except RuntimeError:  # shut down
            worker.in_flight = False

    def _started_locked(self, uid: str, container: str) -> bool:
        startup = self._workers.get((uid, container, ProbeType.STARTUP))
        return startup is None or startup.result is True

    def _probe(self, worker: ProbeWorker, container_id: str) -> None:
        spec, pod = worker.spec, worker.pod
        try:
            try:
                runner = self._exec_runner(pod, spec.container)
                outcome: Outcome | None = run_probe(spec, self.host_ip, runner)
                error = ""
            except ProbeError as exc:
                outcome, error = None, str(exc)
            except Exception as exc:  # a handler bug must not stop the probes
                log.exception("%s probe of %s/%s", spec.kind, pod.key, spec.container)
                outcome, error = None, str(exc)
            self._apply(worker, container_id, outcome, error)
        finally:
            worker.in_flight = False

    def _apply(self, worker: ProbeWorker, container_id: str, outcome: Outcome | None, error: str) -> None:
        spec, pod = worker.spec, worker.pod
        kind = spec.kind.value
        if outcome is None:
            self.event(pod, spec.container, "Warning", "Unhealthy", f"{kind} probe errored: {error}")
            self._count(worker, "unknown")
            return
        success = outcome.result != Result.FAILURE
        if outcome.result == Result.WARNING:
            self.event(
                pod, spec.container, "Warning", "ProbeWarning", f"{kind} probe warning: {outcome.output}"
            )
        elif not success:
            self.event(pod, spec.container, "Warning", "Unhealthy", f"{kind} probe failed: {outcome.output}")
        self._count(worker, "successful" if success else "failed")
        with self._lock:
            if self._workers.get(spec.key) is not worker or worker.container_id != container_id:
                return  # removed, or the container was replaced while the probe ran
            changed = worker.record(success)
        if not changed:
            return
        log.info(
            "pod %s container %s: %s probe %s",
            pod.key,
            spec.container,
            kind,
            "succeeded" if success else "failed",
        )
        if spec.kind != ProbeType.LIVENESS:
            self.on_change(spec.pod_uid)
        if not success and spec.kind != ProbeType.READINESS:
            self.on_unhealthy(spec.pod_uid)

    def event(self, pod: Pod, container: str, kind: str, reason: str, message: str) -> None:
        """Record an event about a container (through `events`, when the agent has a cluster to tell)."""
        if self.events is not None:
            try:
                self.events(pod, container, kind, reason, message)
            except Exception:
                log.exception("probe event")

    def _count(self, worker: ProbeWorker, result: str | None) -> None:
        if self.count is not None:
            try:
                self.count(worker.spec, worker.pod, result)
            except Exception:
                log.exception("probe metric")
