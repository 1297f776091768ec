"""The agent's side of the prober: a container's state for a worker, its exec runner, its kill decision.

`container_view` reads a container record (agent/container/podrecord.py) into the worker's
`ContainerView`; the container ID is the restart count and pid, so a restart or an adoption by a restarted
agent starts the probe's state over. `exec_runner` binds `execsync.exec_in_container` to one container of a
pod, with its
securityContext.
`unhealthy_containers` is what SyncPod asks before starting containers: each running container whose
liveness or startup probe has failed, with the kubelet's Killing message and the grace period to use
(the probe's terminationGracePeriodSeconds, else the pod's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.container.downwardapi import ContainerConfigError, HostInfo
from agent.container.execresult import ExecResult, ExecRunner
from agent.container.podrecord import RUNNING, TERMINATED, ContainerRecord, PodRecord
from agent.container.security import SecurityPolicy
from agent.kuberuntime.execsync import exec_in_container
from agent.kuberuntime.processes import ProcessStartError
from agent.kuberuntime.securitycontext import process_security
from agent.prober.handlers import ProbeError
from agent.prober.manager import ProbeManager
from agent.prober.worker import ContainerView
from kubenode.model import Pod


def container_id(c: ContainerRecord) -> str:
    if c.container_id:  # a CRI container's (it has no pid the agent knows)
        return f"{c.restart_count}:{c.container_id}"
    return f"{c.restart_count}:{c.pid}" if c.pid is not None else ""


def container_view(pod: Pod | None, record: PodRecord | None, name: str) -> ContainerView | None:
    c = record.containers.get(name) if record is not None else None
    if pod is None or record is None or c is None:
        return None
    last_id = f"{c.restart_count}:exited" if c.state == TERMINATED or c.last_exit_code is not None else ""
    return ContainerView(
        container_id=container_id(c) or last_id,
        running=c.state == RUNNING,
        started_clock=c.started_clock,
        pod_terminal=record.phase in ("Succeeded", "Failed"),
        pod_deleting=pod.deletion_timestamp is not None,
        restart_never=pod.restart_policy == "Never",
    )


def exec_runner(
    pod: Pod,
    name: str,
    procs_files: Callable[[Pod], Sequence[str]],
    host: HostInfo,
    policy: SecurityPolicy,
    container_pid: Callable[[], int | None] = lambda: None,
) -> ExecRunner:
    container = next((c for c in pod.all_containers if c.name == name), None)

    def run(command: Sequence[str], timeout: float) -> ExecResult:
        if container is None:
            raise ProbeError(f"container {name} is not in the pod's spec")
        try:
            security = process_security(pod, container, policy)  # no more than the container may do
            return exec_in_container(
                pod,
                container,
                command,
                procs_files(pod),
                host,
                timeout=timeout,
                security=security,
                container_pid=container_pid(),
            )
        except (ProcessStartError, ContainerConfigError) as exc:
            raise ProbeError(str(exc)) from None

    return run


@dataclass(frozen=True)
class Unhealthy:
    container: str
    message: str  # the Killing event's
    grace: int


def unhealthy_containers(prober: ProbeManager, pod: Pod, record: PodRecord) -> list[Unhealthy]:
    found = []
    restart = pod.restart_policy != "Never"
    for c in pod.all_containers:
        rec = record.containers.get(c.name)
        if rec is None or rec.state != RUNNING:
            continue
        spec = prober.failed_probe(pod.uid, c.name, container_id(rec))
        if spec is None:
            continue
        message = f"Container {c.name} failed {spec.kind.value.lower()} probe"
        if restart:
            message += ", will be restarted"
        grace = spec.termination_grace or pod.termination_grace_period_seconds
        found.append(Unhealthy(c.name, message, grace))
    return found
