"""The order in which a pod's containers start, shared by both runtimes (the kubelet's computePodActions).

`ContainerSequence.start_due`: init containers one at a time to completion, in order (a restartable init
container, a sidecar, only has to be running), then every app container. A container that exited is restarted
according to the pod's restartPolicy (Always; OnFailure when the exit code is not 0; Never) with the kubelet's
crash-loop backoff, during which it waits with reason CrashLoopBackOff. What starting one container means is
the `launch` the runtime gives it: a host process (runtime.ProcessRuntime) or a CRI container
(cri/runtime.CRIRuntime).
`pod_phase` is the kubelet's getPhase over the recorded container states.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from agent.container.podrecord import RUNNING, TERMINATED, WAITING, ContainerRecord, PodRecord
from agent.container.resources import NO_RESOURCES, ContainerResources
from agent.util.backoff import CrashLoopBackoff
from kubenode.model import Container, Pod

# Starts one container now (its restart count already advanced) and records the outcome: a host process
# (runtime.ProcessRuntime) or a CRI container (cri/runtime.CRIRuntime). Its arguments: the pod, the container,
# the pod's record, where the runtime starts it (its own type), the container's resources, the requeue hints.
Launch = Callable[[Pod, Container, PodRecord, Any, ContainerResources, list[float]], None]


class ContainerSequence:
    def __init__(self, backoff: CrashLoopBackoff, clock: Callable[[], float], launch: Launch) -> None:
        self.backoff = backoff
        self._clock = clock
        self._launch = launch

    def start_due(
        self,
        pod: Pod,
        record: PodRecord,
        where: Any,
        resources: Mapping[str, ContainerResources],
        hints: list[float],
        cancelled: threading.Event | None,
    ) -> None:
        for c in pod.init_containers:
            rec = record.containers[c.name]
            given = resources.get(c.name, NO_RESOURCES)
            if c.is_sidecar:
                if rec.state != RUNNING:
                    self._start_or_wait(pod, c, record, where, given, hints, init=True)
                if rec.state != RUNNING:
                    break  # later init containers wait for the sidecar to run
                continue
            if rec.state == TERMINATED and rec.exit_code == 0:
                continue
            if rec.state != RUNNING:
                self._start_or_wait(pod, c, record, where, given, hints, init=True)
            break  # wait for this init container to complete
        else:
            for c in pod.containers:
                if cancelled is not None and cancelled.is_set():
                    return  # termination preempts the remaining starts
                rec = record.containers[c.name]
                if rec.state != RUNNING:
                    given = resources.get(c.name, NO_RESOURCES)
                    self._start_or_wait(pod, c, record, where, given, hints, init=False)

    def _should_restart(self, pod: Pod, rec: ContainerRecord, init: bool) -> bool:
        code = rec.exit_code if rec.state == TERMINATED else rec.last_exit_code
        if init:
            return pod.restart_policy != "Never" and code != 0
        return pod.restart_policy == "Always" or (pod.restart_policy == "OnFailure" and code != 0)

    def _start_or_wait(
        self,
        pod: Pod,
        c: Container,
        record: PodRecord,
        where: Any,
        resources: ContainerResources,
        hints: list[float],
        *,
        init: bool,
    ) -> None:
        rec = record.containers[c.name]
        restarting = rec.state == TERMINATED or rec.reason == "CrashLoopBackOff"
        if restarting:
            if not self._should_restart(pod, rec, init or c.is_sidecar):
                return
            key = f"{pod.uid}/{c.name}"
            finished = rec.finished_clock if rec.finished_clock is not None else self._clock()
            wait = self.backoff.remaining(key, finished)
            if wait > 0:
                if rec.state == TERMINATED:
                    rec.last_exit_code, rec.last_reason = rec.exit_code, rec.reason
                rec.state, rec.reason, rec.exit_code = WAITING, "CrashLoopBackOff", None
                rec.message = f"back-off {self.backoff.current(key):.0f}s restarting failed container"
                hints.append(wait)
                return
            self.backoff.restarted(key, finished)
            if rec.state == TERMINATED:
                rec.last_exit_code, rec.last_reason = rec.exit_code, rec.reason
            rec.restart_count += 1
        self._launch(pod, c, record, where, resources, hints)


def pod_phase(pod: Pod, record: PodRecord) -> str:
    """The kubelet's getPhase over the recorded container states."""
    for c in pod.init_containers:
        rec = record.containers.get(c.name)
        if rec is None:
            return "Pending"
        if c.is_sidecar:
            if rec.state != RUNNING:
                return "Pending"
            continue
        if rec.state == TERMINATED and rec.exit_code == 0:
            continue
        if rec.state == TERMINATED and pod.restart_policy == "Never":
            return "Failed"
        return "Pending"
    running = waiting = succeeded = failed = 0
    for c in pod.containers:
        rec = record.containers.get(c.name)
        if rec is None or (rec.state == WAITING and rec.last_exit_code is None and rec.restart_count == 0):
            waiting += 1
        elif rec.state == RUNNING:
            running += 1
        else:
            code = rec.exit_code if rec.state == TERMINATED else rec.last_exit_code
            if code == 0:
                succeeded += 1
            else:
                failed += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if pod.restart_policy == "Always":
        return "Running"
    if pod.restart_policy == "OnFailure":
        return "Running" if failed else "Succeeded"
    return "Failed" if failed else "Succeeded"
