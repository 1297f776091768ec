"""Server-side Table printing (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) for the served kinds.

Without it kubectl prints only NAME and AGE. Columns and cell text follow kube's
pkg/printers/internalversion/printers.go: priority-1 columns show only with `-o wide`; `row.object` is
PartialObjectMetadata unless the client asks `includeObject=Object` (or None). Each kind has one function
from an object (plain JSON mapping) to its cells; `to_table` assembles the Table around them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from apiserver.draprinter import DRA_PRINTERS
from apiserver.printers_config import CONFIG_PRINTERS
from apiserver.rbacprinter import RBAC_PRINTERS
from apiserver.resources import ResourceInfo
from apiserver.serviceprinter import SERVICE_COLUMNS, service_cells
from apiserver.tablecells import (
    AGE,
    NAME,
    NAME_DESCRIPTION,
    NONE,
    Obj,
    column,
    human_duration,
    parse_time,
    since,
)
from apiserver.tablecells import meta as _meta
from apiserver.tablecells import spec as _spec
from apiserver.tablecells import status as _status
from apiserver.workloadprinter import WORKLOAD_PRINTERS

# ---- pods -------------------------------------------------------------------------------------------------

POD_COLUMNS = [
    NAME,
    column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    column("Status", "The aggregate status of the containers in this pod."),
    column(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last container "
        "in this pod has restarted.",
    ),
    AGE,
    column(
        "IP",
        "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        priority=1,
    ),
    column("Node", "NodeName is a request to schedule this pod onto a specific node.", priority=1),
    column(
        "Nominated Node",
        "nominatedNodeName is set only when this pod preempts other pods on the node.",
        priority=1,
    ),
    column(
        "Readiness Gates",
        "If specified, all readiness gates will be evaluated for pod readiness.",
        priority=1,
    ),
]


def _pod_reason(pod: Obj, status: Mapping[str, Any]) -> tuple[str, int, int, int, datetime | None]:
    """STATUS text, ready/total containers, restarts and the last restart time, as kube's printPod."""
    spec = _spec(pod)
    containers = spec.get("containers") or []
    reason = status.get("reason") or status.get("phase") or ""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    restarts, ready, last_restart = 0, 0, None
    init_statuses = status.get("initContainerStatuses") or []
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    initializing = False
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        sidecar = (init_specs.get(cs.get("name")) or {}).get("restartPolicy") == "Always"
        if terminated and terminated.get("exitCode") == 0:
            continue
        if sidecar and cs.get("started"):
            continue
        if terminated:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif terminated.get("signal"):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{terminated.get('exitCode')}"
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    has_running = False
    statuses = status.get("containerStatuses") or []
    for cs in reversed(statuses):
        restarts += int(cs.get("restartCount") or 0)
        last_finished = parse_time(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
        if last_finished is not None and (last_restart is None or last_finished > last_restart):
            last_restart = last_finished
        if initializing:
            continue
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            reason = (
                f"Signal:{terminated['signal']}"
                if terminated.get("signal")
                else f"ExitCode:{terminated.get('exitCode')}"
            )
        elif "running" in state and state["running"] is not None and cs.get("ready"):
            has_running = True
            ready += 1
    if not initializing and reason == "Completed" and has_running:
        ready_condition = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        reason = "Running" if ready_condition and ready_condition.get("status") == "True" else "NotReady"
    deletion = _meta(pod).get("deletionTimestamp")
    if deletion and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deletion and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason, ready, len(containers), restarts, last_restart


def pod_cells(pod: Obj, now: datetime) -> list[Any]:
    status = _status(pod)
    reason, ready, total, restarts, last_restart = _pod_reason(pod, status)
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    gates = _spec(pod).get("readinessGates") or []
    gates_text = NONE
    if gates:
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        passing = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gates_text = f"{passing}/{len(gates)}"
    return [
        _meta(pod).get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts_text,
        since(_meta(pod).get("creationTimestamp"), now),
        status.get("podIP") or NONE,
        _spec(pod).get("nodeName") or NONE,
        status.get("nominatedNodeName") or NONE,
        gates_text,
    ]


# ---- nodes ------------------------------------------------------------------------------------------------

NODE_COLUMNS = [
    NAME,
    column("Status", "The status of the node"),
    column("Roles", "The roles of the node"),
    AGE,
    column("Version", "Kubelet Version reported by the node."),
    column(
        "Internal-IP",
        "List of addresses reachable to the node. Queried from cloud provider, if available.",
        priority=1,
    ),
    column(
        "External-IP",
        "List of addresses reachable to the node. Queried from cloud provider, if available.",
        priority=1,
    ),
    column(
        "OS-Image",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        priority=1,
    ),
    column(
        "Kernel-Version",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        priority=1,
    ),
    column(
        "Container-Runtime",
        "Container runtime version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        priority=1,
    ),
]
ROLE_PREFIX = "node-role.kubernetes.io/"


def node_roles(labels: Mapping[str, str]) -> str:
    roles = set()
    for key, value in labels.items():
        if key.startswith(ROLE_PREFIX) and key[len(ROLE_PREFIX) :]:
            roles.add(key[len(ROLE_PREFIX) :])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or NONE


def node_cells(node: Obj, now: datetime) -> list[Any]:
    status = _status(node)
    states: list[str] = []
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            states = ["Ready" if cond.get("status") == "True" else "NotReady"]
    if not states:
        states = ["Unknown"]
    if _spec(node).get("unschedulable"):
        states.append("SchedulingDisabled")
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind and a.get("address")), NONE)

    return [
        _meta(node).get("name", ""),
        ",".join(states),
        node_roles(_meta(node).get("labels") or {}),
        since(_meta(node).get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


# ---- events, leases, namespaces ---------------------------------------------------------------------------

EVENT_COLUMNS = [
    column("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    column("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    column(
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the transition "
        "into the object's current status.",
    ),
    column("Object", "The object that this event is about."),
    column("Subobject", "The field path of the object this event is about.", priority=1),
    column("Source", "The component reporting this event.", priority=1),
    column("Message", "A human-readable description of the status of this operation."),
    column("First Seen", "The time at which the event was first recorded.", priority=1),
    column("Count", "The number of times this event has occurred.", priority=1),
    column("Name", NAME_DESCRIPTION, priority=1, fmt="name"),
]


def event_cells(event: Obj, now: datetime) -> list[Any]:
    first = event.get("firstTimestamp") or event.get("eventTime")
    last = (
        event.get("lastTimestamp")
        or (event.get("series") or {}).get("lastObservedTime")
        or event.get("eventTime")
    )
    count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
    last_seen = since(last, now)
    if count > 1:
        last_seen = f"{last_seen} (x{count} over {since(first, now)})"
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return [
        last_seen,
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        f"{component}, {host}" if host else component,
        str(event.get("message", "")).strip(),
        since(first, now),
        str(count),
        _meta(event).get("name", ""),
    ]


LEASE_COLUMNS = [NAME, column("Holder", "The holder of the lease."), AGE]


def lease_cells(lease: Obj, now: datetime) -> list[Any]:
    return [
        _meta(lease).get("name", ""),
        _spec(lease).get("holderIdentity") or "",
        since(_meta(lease).get("creationTimestamp"), now),
    ]


TOPOLOGY_COLUMNS = [
    NAME,
    column("Policy", "The node's Topology Manager policy (attribute topologyManagerPolicy)."),
    column("Scope", "The node's Topology Manager scope (attribute topologyManagerScope)."),
    column("Zones", "The NUMA zones the node publishes."),
    AGE,
]


def topology_cells(nrt: Obj, now: datetime) -> list[Any]:
    attributes = {
        a.get("name"): a.get("value", "") for a in nrt.get("attributes") or [] if isinstance(a, dict)
    }
    zones = [z.get("name", "") for z in nrt.get("zones") or [] if isinstance(z, dict)]
    return [
        _meta(nrt).get("name", ""),
        attributes.get("topologyManagerPolicy", ""),
        attributes.get("topologyManagerScope", ""),
        ",".join(zones),
        since(_meta(nrt).get("creationTimestamp"), now),
    ]


NAMESPACE_COLUMNS = [NAME, column("Status", "The status of the namespace"), AGE]


def namespace_cells(ns: Obj, now: datetime) -> list[Any]:
    return [
        _meta(ns).get("name", ""),
        _status(ns).get("phase", ""),
        since(_meta(ns).get("creationTimestamp"), now),
    ]


DEFAULT_COLUMNS = [NAME, AGE]


def default_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_meta(obj).get("name", ""), since(_meta(obj).get("creationTimestamp"), now)]


CellFn = Callable[[Obj, datetime], list[Any]]
PRINTERS: dict[tuple[str, str], tuple[list[dict[str, Any]], CellFn]] = {
    ("", "pods"): (POD_COLUMNS, pod_cells),
    ("", "nodes"): (NODE_COLUMNS, node_cells),
    ("", "events"): (EVENT_COLUMNS, event_cells),
    ("", "namespaces"): (NAMESPACE_COLUMNS, namespace_cells),
    ("coordination.k8s.io", "leases"): (LEASE_COLUMNS, lease_cells),
    **CONFIG_PRINTERS,
    ("", "services"): (SERVICE_COLUMNS, service_cells),
    ("topology.node.k8s.io", "noderesourcetopologies"): (TOPOLOGY_COLUMNS, topology_cells),
    **WORKLOAD_PRINTERS,
    **DRA_PRINTERS,
    **RBAC_PRINTERS,
}


def partial_metadata(obj: Obj) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": dict(_meta(obj))}


def to_table(
    resource: ResourceInfo,
    objects: Sequence[Mapping[str, Any]],
    *,
    include_object: str,
    resource_version: str,
    continue_token: str = "",
    now: datetime | None = None,
) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table; include_object is kube's includeObject: Metadata (default), Object or None."""
    columns, cells = PRINTERS.get((resource.group, resource.plural), (DEFAULT_COLUMNS, default_cells))
    now = now or datetime.now(UTC)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": cells(obj, now)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = partial_metadata(obj)
        rows.append(row)
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    }
