"""The agent's own status endpoint's JSON (`/pods`, `kubenode agent status`, `kubenode trace`): a PodList of
the pods it holds a record of, each with the agent's view under `kubenode` (source, worker, cgroup, cpuset,
limits, devices and their specs and mounts, restarts), the Topology Manager's choice where one is made, and
the manifest errors of every source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agent.config.sources import ManifestError
from agent.container.podrecord import RUNNING, TERMINATED, rfc3339
from agent.container.podview import PodView

READ_ONLY = {True: ":ro", False: ""}  # a mount's suffix in the specs shown


def pod_list(
    node: str,
    views: Sequence[PodView],
    limits_of: Callable[[str], Mapping[str, str]],
    probes: Callable[[str, str, bool], tuple[bool, bool]],
    topology: Callable[[str], Any] | None,
    errors: Iterable[ManifestError],
) -> dict[str, Any]:
    """`limits_of(uid)` reads a placed pod's cgroup limits; `topology(uid)` what the Topology Manager saw."""
    items = [
        pod_json(view, limits_of(view.record.uid) if view.record.cgroup else {}, probes) for view in views
    ]
    if topology is not None:  # what the Topology Manager saw and chose, for `kubenode trace`
        for item in items:
            item["kubenode"]["topology"] = topology(item["metadata"]["uid"])
    return {
        "kind": "PodList",
        "apiVersion": "v1",
        "node": node,
        "items": items,
        "errors": [{"source": e.source, "field": e.field, "message": e.message} for e in errors],
    }


def _container_status(c: Any, ready: bool) -> dict[str, Any]:
    if c.state == RUNNING:
        state: dict[str, Any] = {"running": {"startedAt": c.started_at}}
    elif c.state == TERMINATED:
        state = {
            "terminated": {
                "exitCode": c.exit_code,
                "reason": c.reason,
                "message": c.message,
                "startedAt": c.started_at,
                "finishedAt": c.finished_at,
            }
        }
    else:
        state = {"waiting": {"reason": c.reason, "message": c.message}}
    status: dict[str, Any] = {
        "name": c.name,
        "state": state,
        "ready": ready,
        "restartCount": c.restart_count,
        "image": "",
    }
    if c.last_exit_code is not None:
        status["lastState"] = {"terminated": {"exitCode": c.last_exit_code, "reason": c.last_reason}}
    if c.pid is not None:
        status["pid"] = c.pid
    if c.log_path:
        status["logPath"] = c.log_path
    return status


def pod_json(
    view: PodView, limits: Mapping[str, str], probes: Callable[[str, str, bool], tuple[bool, bool]]
) -> dict[str, Any]:
    """The agent's own view of a pod (`/pods`, `kubenode agent status`); `probes` says which running
    containers are ready (the prober's readiness, as in the API status)."""
    r = view.record

    def status_of(c: Any) -> dict[str, Any]:
        return _container_status(c, probes(r.uid, c.name, c.state == RUNNING)[1])

    # The pod's worker adds to these dicts while a sync runs: iterate (and serialise) copies, each
    # taken in one step, or this raises "dictionary changed size during iteration".
    containers = list(r.containers.values())
    resources = dict(r.resources)
    status: dict[str, Any] = {
        "phase": r.phase,
        "qosClass": r.qos,
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "initContainerStatuses": [status_of(c) for c in containers if c.init],
        "containerStatuses": [status_of(c) for c in containers if not c.init],
    }
    for key, value in (("reason", r.reason), ("message", r.message), ("startTime", r.start_time)):
        if value:
            status[key] = value
    return {
        "metadata": {
            "name": r.name,
            "namespace": r.namespace,
            "uid": r.uid,
            "annotations": dict(view.pod.annotations) if view.pod else {},
        },
        "spec": {"nodeName": view.pod.node_name if view.pod else ""},
        "status": status,
        "kubenode": {
            "source": view.pod.source if view.pod else "",
            "worker": view.worker,
            "cgroup": r.cgroup,
            "cpuset": r.cpuset,
            "limits": dict(limits),
            "devices": dict(r.devices),
            "deviceSpecs": {
                name: [f"{d.host_path}:{d.container_path}:{d.permissions}" for d in given.devices]
                for name, given in resources.items()
            },
            "mounts": {
                name: [f"{m.host_path}:{m.container_path}{READ_ONLY[m.read_only]}" for m in given.mounts]
                for name, given in resources.items()
            },
            "restarts": r.restarts(),
            "seen": rfc3339(),
        },
    }
