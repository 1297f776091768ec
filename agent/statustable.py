"""`kubenode agent status`: the agent's pods as a table, fetched from its local endpoint."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any

from kubenode.table import table_lines

COLUMNS = ("POD", "QOS", "PHASE", "CGROUP", "CPU QUOTA", "CPUSET", "DEVICES", "RESTARTS")


def fetch(listen: str, path: str = "/pods", timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(f"http://{listen}{path}", timeout=timeout) as response:
        return json.loads(response.read())


def cpu_quota(limits: Mapping[str, str]) -> str:
    quota, period = limits.get("cpu_quota", ""), limits.get("cpu_period", "")
    if not quota or quota in ("-1", "max"):
        return "-"
    return f"{quota}/{period}" if period else quota


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
        phase = status.get("phase", "")
        if status.get("reason"):
            phase = f"{phase} ({status['reason']})"
        cpuset = extra.get("cpuset") or limits.get("cpuset", "") or "-"
        result.append(
            (
                f"{meta['namespace']}/{meta['name']}",
                status.get("qosClass", ""),
                phase,
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
