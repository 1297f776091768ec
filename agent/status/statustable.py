"""`kubenode agent status`: the agent's pods as a table, fetched from its local endpoint.

The STATUS column is what `kubectl get pods` shows there (kubectl's printPod): the phase, replaced by
the pod's reason, by the first failing or waiting init container (`Init:CrashLoopBackOff`, `Init:0/2`),
or else by the last container's waiting or terminated reason (`ContainerCreating`, `CrashLoopBackOff`,
`ImageNotSupported`, `Completed`, `ExitCode:3`), and `Terminating` while a live pod is being deleted.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any

from kubenode.table import table_lines

COLUMNS = ("POD", "QOS", "STATUS", "CGROUP", "CPU QUOTA", "CPUSET", "DEVICES", "RESTARTS")


def fetch(listen: str, path: str = "/pods", timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(f"http://{listen}{path}", timeout=timeout) as response:
        return json.loads(response.read())


def cpu_quota(limits: Mapping[str, str]) -> str:
    quota, period = limits.get("cpu_quota", ""), limits.get("cpu_period", "")
    if not quota or quota in ("-1", "max"):
        return "-"
    return f"{quota}/{period}" if period else quota


def _terminated_reason(terminated: Mapping[str, Any], prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def _condition_true(status: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions", []))


def kubectl_status(item: Mapping[str, Any]) -> str:
    """The STATUS that `kubectl get pods` prints for this pod (kubectl's printPod, in the same order)."""
    status, metadata = item.get("status", {}), item.get("metadata", {})
    reason = str(status.get("reason") or status.get("phase") or "")
    sidecars = {
        c.get("name")
        for c in item.get("spec", {}).get("initContainers", [])
        if c.get("restartPolicy") == "Always"
    }
    init_statuses = status.get("initContainerStatuses", [])
    initializing = False
    for index, container in enumerate(init_statuses):
        state = container.get("state", {})
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode") == 0:
            continue
        if container.get("name") in sidecars and container.get("started"):
            continue
        initializing = True
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            total = len(item.get("spec", {}).get("initContainers", [])) or len(init_statuses)
            reason = f"Init:{index}/{total}"
        break
    if not initializing or _condition_true(status, "Initialized"):
        has_running = False
        for container in reversed(status.get("containerStatuses", [])):
            state = container.get("state", {})
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if waiting and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None:
                reason = _terminated_reason(terminated)
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
        if reason == "Completed" and has_running:
            # An agent status without conditions (no readiness to report) counts as ready.
            ready = _condition_true(status, "Ready") or "conditions" not in status
            reason = "Running" if ready else "NotReady"
    if metadata.get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason


def rows(document: Mapping[str, Any]) -> list[tuple[str, ...]]:
    result: list[tuple[str, ...]] = []
    for item in document.get("items", []):
        meta, status, extra = item["metadata"], item["status"], item.get("kubenode", {})
        limits = extra.get("limits", {})
        devices = sorted(
            f"{resource}={','.join(ids)}"
            for per_container in extra.get("devices", {}).values()
            for resource, ids in per_container.items()
        )
        cpuset = extra.get("cpuset") or limits.get("cpuset", "") or "-"
        result.append(
            (
                f"{meta['namespace']}/{meta['name']}",
                status.get("qosClass", ""),
                kubectl_status(item),
                extra.get("cgroup") or "-",
                cpu_quota(limits),
                cpuset,
                " ".join(devices) or "-",
                str(extra.get("restarts", 0)),
            )
        )
    return result


def render(document: Mapping[str, Any]) -> str:
    lines = table_lines(COLUMNS, rows(document))
    for error in document.get("errors", []):
        where = ": ".join(p for p in (error.get("source", ""), error.get("field", "")) if p)
        lines.append(f"manifest error: {where}: {error.get('message', '')}")
    return "\n".join(lines)
