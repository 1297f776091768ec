"""A pod's API status from the agent's record: the kubelet's generateAPIPodStatus for processes.

phase, startTime, hostIP/hostIPs and podIP/podIPs (pods share the host's network), qosClass,
the conditions PodScheduled, PodReadyToStartContainers (the pod cgroup exists), Initialized,
ContainersReady and Ready, and a status per container in spec order: waiting (with the
runtime's reason), running (startedAt) or terminated (exit code, reason, times), lastState,
restartCount, started and ready. `probes` (the prober's ProbeManager.status) says whether a running
container has started (its startup probe passed) and is ready (its readiness probe passed); without a
probe a running container is both. ContainersReady needs every app container ready; Ready needs that
and every spec.readinessGates condition True in the pod's status (set by whoever owns the gate), with
the kubelet's ReadinessGatesNotReady reason and messages. A pod rejected by admission gets phase Failed
with the kubelet's reason and message.

Condition lastTransitionTime is kept from the previous status while the condition's value
is unchanged, so a status that did not change compares equal and is not written again. A pod whose
object has a `metadata.generation` (kube-apiserver 1.33+ sets one) gets it as `status.observedGeneration`
and as each of these conditions' `observedGeneration`, as a 1.35+ kubelet writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent.container.podrecord import RUNNING, TERMINATED, ContainerRecord, PodRecord
from agent.prober.spec import readiness_gates
from kubenode.kubeclient.timefmt import rfc3339
from kubenode.model import Container, Pod


def _state(c: ContainerRecord | None) -> dict[str, Any]:
    if c is None:
        return {"waiting": {"reason": "ContainerCreating"}}
    if c.state == RUNNING:
        return {"running": {"startedAt": c.started_at or rfc3339()}}
    if c.state == TERMINATED:
        terminated: dict[str, Any] = {"exitCode": c.exit_code if c.exit_code is not None else 0}
        for key, value in (
            ("reason", c.reason),
            ("message", c.message),
            ("startedAt", c.started_at),
            ("finishedAt", c.finished_at),
        ):
            if value:
                terminated[key] = value
        return {"terminated": terminated}
    waiting = {"reason": c.reason or "ContainerCreating"}
    if c.message:
        waiting["message"] = c.message
    return {"waiting": waiting}


# (pod uid, container, running) -> (started, ready)
ProbeStatus = Callable[[str, str, bool], tuple[bool, bool]]


def _no_probes(uid: str, container: str, running: bool) -> tuple[bool, bool]:
    return running, running


def container_status(
    pod: Pod,
    spec: Container,
    c: ContainerRecord | None,
    *,
    init: bool = False,
    probes: ProbeStatus = _no_probes,
) -> dict[str, Any]:
    running = c is not None and c.state == RUNNING
    started, ready = probes(pod.uid, spec.name, running)
    if init and not spec.is_sidecar:  # an init container is ready once it has completed
        ready = c is not None and c.state == TERMINATED and c.exit_code == 0
    status: dict[str, Any] = {
        "name": spec.name,
        "image": spec.image or "kubenode/process",
        "imageID": c.image_ref if c is not None else "",
        "ready": ready,
        "started": started,
        "restartCount": c.restart_count if c is not None else 0,
        "state": _state(c),
        "lastState": {},
    }
    if c is not None and c.container_id:
        status["containerID"] = c.container_id  # a CRI container's
    elif c is not None and (c.state != "waiting" or c.restart_count):
        status["containerID"] = f"kubenode://{pod.uid}/{spec.name}/{c.restart_count}"
    if c is not None and c.last_exit_code is not None:
        status["lastState"] = {
            "terminated": {"exitCode": c.last_exit_code, "reason": c.last_reason or "Error"}
        }
    return status


def _condition(kind: str, ok: bool, reason: str = "", message: str = "") -> dict[str, Any]:
    # reason and message are always named, null when there is none: the status is sent as a strategic
    # merge patch, which merges conditions by type, so an absent key would keep the previous reason.
    condition: dict[str, Any] = {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": None,
        "message": None,
    }
    if not ok and reason:
        condition["reason"] = reason
        if message:
            condition["message"] = message
    return condition


def _gate_problems(pod: Pod) -> list[str]:
    """The kubelet's messages for readiness gates whose condition is missing or not True."""
    status = pod.raw.get("status") if isinstance(pod.raw, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    by_type = {c.get("type"): c for c in conditions or [] if isinstance(c, Mapping)}
    problems = []
    for gate in readiness_gates(pod):
        condition = by_type.get(gate)
        if condition is None:
            problems.append(f'corresponding condition of pod readiness gate "{gate}" does not exist.')
        elif condition.get("status") != "True":
            problems.append(
                f'the status of pod readiness gate "{gate}" is not "True", but {condition.get("status")}'
            )
    return problems


def pod_conditions(
    pod: Pod, record: PodRecord, ready: Mapping[str, bool] | None = None
) -> list[dict[str, Any]]:
    """`ready`: each app container's readiness (default: running)."""
    by_name = record.containers
    incomplete = []
    for c in pod.init_containers:
        rec = by_name.get(c.name)
        if c.is_sidecar:
            done = rec is not None and rec.state == RUNNING
        else:
            done = rec is not None and rec.state == TERMINATED and rec.exit_code == 0
        if not done and record.phase != "Succeeded":
            incomplete.append(c.name)
    if ready is None:
        ready = {
            c.name: bool(by_name.get(c.name) and by_name[c.name].state == RUNNING) for c in pod.containers
        }
    unready = [c.name for c in pod.containers if not ready.get(c.name)]
    succeeded = record.phase == "Succeeded"
    ready_reason = "PodCompleted" if succeeded else "ContainersNotReady"
    ready_message = "" if succeeded else f"containers with unready status: [{' '.join(unready)}]"
    pod_ready, pod_reason, pod_message = not unready, ready_reason, ready_message
    gates = _gate_problems(pod) if not unready else []
    if gates:
        pod_ready, pod_reason, pod_message = False, "ReadinessGatesNotReady", ", ".join(gates)
    return [
        _condition(
            "PodReadyToStartContainers", bool(record.cgroup) and record.phase not in ("Succeeded", "Failed")
        ),
        _condition(
            "Initialized",
            not incomplete,
            "ContainersNotInitialized",
            f"containers with incomplete status: [{' '.join(incomplete)}]",
        ),
        _condition("ContainersReady", not unready, ready_reason, ready_message),
        _condition("Ready", pod_ready, pod_reason, pod_message),
        _condition("PodScheduled", True),
    ]


def with_transition_times(
    conditions: list[dict[str, Any]], previous: Mapping[str, Mapping[str, Any]], now: str
) -> list[dict[str, Any]]:
    """lastTransitionTime from `previous` (by type) where the value did not change, else `now`."""
    result = []
    for c in conditions:
        before = previous.get(c["type"])
        since = before.get("lastTransitionTime") if before and before.get("status") == c["status"] else None
        result.append({**c, "lastTransitionTime": since or now})
    return result


def api_pod_status(
    pod: Pod,
    record: PodRecord,
    host_ip: str,
    *,
    previous: Mapping[str, Any] | None = None,
    start_time: str = "",
    now: str = "",
    probes: ProbeStatus = _no_probes,
) -> dict[str, Any]:
    now = now or rfc3339()
    before = {c.get("type"): c for c in (previous or {}).get("conditions") or []}
    statuses = [
        container_status(pod, c, record.containers.get(c.name), probes=probes) for c in pod.containers
    ]
    ready = {s["name"]: bool(s["ready"]) for s in statuses}
    conditions = with_transition_times(pod_conditions(pod, record, ready), before, now)
    generation = (pod.raw.get("metadata") or {}).get("generation")
    if generation:  # the spec this status answers (PodObservedGenerationTracking, GA in 1.35)
        conditions = [{**c, "observedGeneration": generation} for c in conditions]
    status: dict[str, Any] = {
        "phase": record.phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": host_ip,
        "podIPs": [{"ip": host_ip}],
        "qosClass": record.qos or pod.qos_class.value,
        "startTime": record.start_time or start_time or now,
        "initContainerStatuses": [
            container_status(pod, c, record.containers.get(c.name), init=True, probes=probes)
            for c in pod.init_containers
        ],
        "containerStatuses": statuses,
    }
    if generation:
        status["observedGeneration"] = generation
    # Named even when empty (null deletes a reason the patch's merge would otherwise keep).
    status["reason"] = record.reason or None
    status["message"] = record.message or None
    return status


def rejected_status(reason: str, message: str, host_ip: str, now: str = "") -> dict[str, Any]:
    """A pod refused before it ran (admission, an invalid spec): phase Failed with why."""
    return {
        "phase": "Failed",
        "reason": reason,
        "message": message,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": now or rfc3339(),
    }
