"""Table columns of Deployments, ReplicaSets, DaemonSets, Jobs and ServiceAccounts, as kube's printers.go.

The `-o wide` columns (priority 1) are the template's containers, their images and the selector.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.tablecells import AGE, NAME, NONE, Obj, column, human_duration, parse_time, since
from apiserver.tablecells import meta as _meta
from apiserver.tablecells import spec as _spec
from apiserver.tablecells import status as _status
from kubenode.labelselector import to_text

WIDE = [
    column("Containers", "Names of each container in the template.", priority=1),
    column("Images", "Images referenced by each container in the template.", priority=1),
    column("Selector", "Label selector for pods.", priority=1),
]


def _wide(obj: Obj) -> list[Any]:
    containers = ((_spec(obj).get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        to_text(_spec(obj).get("selector")) or NONE,
    ]


def _count(obj: Obj, key: str) -> int:
    return int(_status(obj).get(key) or 0)


DEPLOYMENT_COLUMNS = [
    NAME,
    column("Ready", "Number of the pod with ready state"),
    column(
        "Up-to-date",
        "Total number of non-terminated pods targeted by this deployment that have the "
        "desired template spec.",
        kind="integer",
    ),
    column(
        "Available",
        "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        kind="integer",
    ),
    AGE,
    *WIDE,
]


def deployment_cells(obj: Obj, now: datetime) -> list[Any]:
    wanted = int(_spec(obj).get("replicas") or 0)
    return [
        _meta(obj).get("name", ""),
        f"{_count(obj, 'readyReplicas')}/{wanted}",
        _count(obj, "updatedReplicas"),
        _count(obj, "availableReplicas"),
        since(_meta(obj).get("creationTimestamp"), now),
        *_wide(obj),
    ]


REPLICASET_COLUMNS = [
    NAME,
    column("Desired", "Replicas is the number of desired replicas.", kind="integer"),
    column("Current", "Replicas is the most recently observed number of replicas.", kind="integer"),
    column("Ready", "The number of ready replicas for this replica set.", kind="integer"),
    AGE,
    *WIDE,
]


def replicaset_cells(obj: Obj, now: datetime) -> list[Any]:
    return [
        _meta(obj).get("name", ""),
        int(_spec(obj).get("replicas") or 0),
        _count(obj, "replicas"),
        _count(obj, "readyReplicas"),
        since(_meta(obj).get("creationTimestamp"), now),
        *_wide(obj),
    ]


DAEMONSET_COLUMNS = [
    NAME,
    column("Desired", "The total number of nodes that should be running the daemon pod.", kind="integer"),
    column("Current", "The number of nodes running at least one daemon pod.", kind="integer"),
    column(
        "Ready",
        "The number of nodes that should be running the daemon pod and have one or more "
        "of the daemon pod running and ready.",
        kind="integer",
    ),
    column("Up-to-date", "The total number of nodes that are running updated daemon pod", kind="integer"),
    column(
        "Available",
        "The number of nodes that should be running the daemon pod and have one or more "
        "of the daemon pod running and available.",
        kind="integer",
    ),
    column("Node Selector", "NodeSelector is a selector which must be true for the pod to fit on a node."),
    AGE,
    *WIDE,
]


def daemonset_cells(obj: Obj, now: datetime) -> list[Any]:
    node_selector = ((_spec(obj).get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    return [
        _meta(obj).get("name", ""),
        _count(obj, "desiredNumberScheduled"),
        _count(obj, "currentNumberScheduled"),
        _count(obj, "numberReady"),
        _count(obj, "updatedNumberScheduled"),
        _count(obj, "numberAvailable"),
        ",".join(f"{k}={v}" for k, v in sorted(node_selector.items())) or NONE,
        since(_meta(obj).get("creationTimestamp"), now),
        *_wide(obj),
    ]


JOB_COLUMNS = [
    NAME,
    column("Status", "Status of the job."),
    column("Completions", "The completion status of the job."),
    column("Duration", "Time required to complete the job."),
    AGE,
    *WIDE,
]
# printJob's order: the first condition that holds names the status.
_JOB_STATES = ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget", "Suspended")


def job_status_text(job: Obj) -> str:
    held = {c.get("type") for c in _status(job).get("conditions") or [] if c.get("status") == "True"}
    if _meta(job).get("deletionTimestamp"):
        return "Terminating"
    return next((state for state in _JOB_STATES if state in held), "Running")


def job_cells(obj: Obj, now: datetime) -> list[Any]:
    spec, status = _spec(obj), _status(obj)
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    started = parse_time(status.get("startTime"))
    finished = parse_time(status.get("completionTime")) or now
    duration = human_duration((finished - started).total_seconds()) if started else ""
    return [
        _meta(obj).get("name", ""),
        job_status_text(obj),
        completions,
        duration,
        since(_meta(obj).get("creationTimestamp"), now),
        *_wide(obj),
    ]


SERVICEACCOUNT_COLUMNS = [NAME, column("Secrets", "", kind="integer"), AGE]


def serviceaccount_cells(obj: Obj, now: datetime) -> list[Any]:
    return [
        _meta(obj).get("name", ""),
        len(obj.get("secrets") or []),
        since(_meta(obj).get("creationTimestamp"), now),
    ]


WORKLOAD_PRINTERS = {
    ("apps", "deployments"): (DEPLOYMENT_COLUMNS, deployment_cells),
    ("apps", "replicasets"): (REPLICASET_COLUMNS, replicaset_cells),
    ("apps", "daemonsets"): (DAEMONSET_COLUMNS, daemonset_cells),
    ("batch", "jobs"): (JOB_COLUMNS, job_cells),
    ("", "serviceaccounts"): (SERVICEACCOUNT_COLUMNS, serviceaccount_cells),
}
