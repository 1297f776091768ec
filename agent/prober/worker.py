"""One probe of one container: the kubelet's prober worker (doProbe) as a state machine with no thread.

The manager asks `prepare(view, started, now)` at every period tick; it answers whether to run the probe now,
and keeps the worker's state as the kubelet's does:
- a new container ID (a restart, or an adopted container after the agent restarted) resets the state: the
  result goes back to the initial value (readiness: failure, liveness: success, startup: unknown), the
  counters to zero, and a hold is lifted;
- after a liveness or startup failure the worker holds (probes nothing) until the container is replaced;
- a container not running gets failure (unless it never ran); a pod being deleted makes readiness fail
  and stops the readiness and startup workers; a terminal pod, or a stopped container that will not be
  restarted (restartPolicy Never), stops the worker;
- liveness and readiness wait for the container to have started (startup probe passed), and the startup
  probe stops once it has; nothing runs until initialDelaySeconds after the container started.
`record(result, now)` then applies the thresholds: the cached result changes only after successThreshold
successes or failureThreshold failures in a row.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from agent.prober.spec import ProbeSpec, ProbeType
from kubenode.model import Pod


class Verdict(enum.Enum):
    RUN = "run"  # run the probe now
    SKIP = "skip"  # nothing to do this tick
    STOP = "stop"  # the worker is done: the manager stops scheduling it (its result stays)


@dataclass(frozen=True)
class ContainerView:
    """What a worker needs to know of its container at a tick."""

    container_id: str  # changes with every (re)start; "" while it never ran
    running: bool
    started_clock: float | None  # when it started, on the manager's clock
    pod_terminal: bool = False
    pod_deleting: bool = False
    restart_never: bool = False


def initial_result(kind: ProbeType) -> bool | None:
    return {ProbeType.READINESS: False, ProbeType.LIVENESS: True, ProbeType.STARTUP: None}[kind]


class ProbeWorker:
    def __init__(self, spec: ProbeSpec, pod: Pod) -> None:
        self.spec = spec
        self.pod = pod
        self.result: bool | None = initial_result(spec.kind)  # the cached result (None: unknown)
        self.container_id = ""
        self.on_hold = False
        self.last_result: bool | None = None
        self.result_run = 0
        self.in_flight = False
        self.stopped = False  # the manager no longer schedules it

    def prepare(self, view: ContainerView | None, started: bool, now: float) -> Verdict:
        kind = self.spec.kind
        if view is None:
            return Verdict.SKIP  # not known to the runtime yet
        if view.pod_terminal:
            return Verdict.STOP
        if not view.container_id:
            return Verdict.SKIP
        if view.container_id != self.container_id:
            self.container_id = view.container_id
            self.result = initial_result(kind)
            self.on_hold = False
            self.last_result, self.result_run = None, 0
        if self.on_hold:
            return Verdict.SKIP
        if not view.running:
            self.result = False
            return Verdict.STOP if view.restart_never else Verdict.SKIP
        if view.pod_deleting and kind != ProbeType.LIVENESS:
            if kind == ProbeType.READINESS:
                self.result = False
            return Verdict.STOP
        if started != (kind != ProbeType.STARTUP):
            # Startup probes only until the container has started; the others only after.
            return Verdict.SKIP
        if view.started_clock is not None and int(now - view.started_clock) < self.spec.initial_delay:
            return Verdict.SKIP
        return Verdict.RUN

    def record(self, success: bool) -> bool:
        """Count one probe result; True when the cached result changed."""
        if self.last_result == success:
            self.result_run += 1
        else:
            self.last_result, self.result_run = success, 1
        threshold = self.spec.success_threshold if success else self.spec.failure_threshold
        if self.result_run < threshold:
            return False
        changed = self.result != success
        self.result = success
        if not success and self.spec.kind != ProbeType.READINESS:
            self.on_hold, self.result_run = True, 0  # the container is killed; wait for the next one
        return changed
