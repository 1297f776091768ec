"""The pod table of `kubenode up`: one row per pod, from the API (node, phase, QoS) and the agent's status
endpoint (allocated devices, cpuset and the limits it read from the pod cgroup), plus, where a GPU plugin
serves /metrics, each pod's GPU utilization and memory (cli.up.gpuusage); and the check that each pod got
what it asked for (`--once`'s exit status).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cli.up.gpuusage import GpuUsage, columns
from kubenode.cpuset import parse_cpuset
from kubenode.model.quantity import to_amount
from kubenode.table import table_lines

HEADER = ("NAMESPACE", "NAME", "NODE", "PHASE", "QOS", "DEVICES", "CPUSET", "CPU-QUOTA", "MEMORY-LIMIT")
GPU_HEADER = ("GPU-UTIL", "GPU-MEM")
EXTENDED_PREFIX = "kubenode.io/"
SETTLED_PHASES = ("Running", "Failed", "Succeeded")


def pod_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def agent_views(status: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The agent's /pods items by (namespace, name)."""
    return {pod_key(item): item for item in status.get("items") or []}


def _devices(kubenode: Mapping[str, Any]) -> str:
    shown = []
    for container, resources in sorted((kubenode.get("devices") or {}).items()):
        for resource, ids in sorted(resources.items()):
            short = resource.removeprefix(EXTENDED_PREFIX)
            shown.append(f"{container}:{short}={','.join(ids)}")
    return " ".join(shown) or "-"


def _quota(limits: Mapping[str, str]) -> str:
    quota = limits.get("cpu_quota")
    if not quota:
        return "-"
    return quota if quota == "max" else f"{quota}/{limits.get('cpu_period', '?')}"


def row(pod: Mapping[str, Any], view: Mapping[str, Any] | None) -> tuple[str, ...]:
    namespace, name = pod_key(pod)
    status = pod.get("status") or {}
    kubenode = (view or {}).get("kubenode") or {}
    limits = kubenode.get("limits") or {}
    return (
        namespace,
        name,
        (pod.get("spec") or {}).get("nodeName") or "<pending>",
        str(status.get("phase") or "Pending"),
        str(status.get("qosClass") or "-"),
        _devices(kubenode),
        str(limits.get("cpuset") or kubenode.get("cpuset") or "-"),
        _quota(limits),
        str(limits.get("memory_limit") or "-"),
    )


def rows(
    pods: list[dict[str, Any]],
    agent_status: Mapping[str, Any],
    gpu: Mapping[tuple[str, str], GpuUsage] | None = None,
) -> list[tuple[str, ...]]:
    """One row per pod; with `gpu` (a GPU plugin's /metrics is read) two more columns, "-" for pods
    holding no GPU."""
    views = agent_views(agent_status)
    table = []
    for pod in sorted(pods, key=pod_key):
        line = row(pod, views.get(pod_key(pod)))
        table.append(line if gpu is None else line + columns(gpu.get(pod_key(pod))))
    return table


def render(table_rows: list[tuple[str, ...]], gpu_columns: bool = False) -> str:
    return "\n".join(table_lines(HEADER + GPU_HEADER if gpu_columns else HEADER, table_rows))


def _container_limits(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        dict((c.get("resources") or {}).get("limits") or {})
        for c in (pod.get("spec") or {}).get("containers") or []
    ]


def shortfalls(pod: Mapping[str, Any], view: Mapping[str, Any] | None) -> list[str]:
    """What the pod asked for and did not get (empty: it got everything). Running (or Succeeded) is asked
    for too; a pod's extended resources must be allocated per container, `kubenode.io/cpu` must be its
    cpuset, and when every container has a cpu (memory) limit the pod cgroup's quota (limit) is their sum."""
    phase = (pod.get("status") or {}).get("phase")
    if phase not in ("Running", "Succeeded"):
        message = (pod.get("status") or {}).get("message") or ""
        return [f"phase {phase or 'Pending'}" + (f": {message}" if message else "")]
    kubenode = (view or {}).get("kubenode") or {}
    limits = kubenode.get("limits") or {}
    problems = []
    devices = kubenode.get("devices") or {}
    exclusive_cpus = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        wanted = (container.get("resources") or {}).get("limits") or {}
        for resource, amount in wanted.items():
            if not resource.startswith(EXTENDED_PREFIX):
                continue
            count = to_amount(resource, amount)
            got = len((devices.get(container.get("name")) or {}).get(resource) or [])
            if got != count:
                problems.append(f"{container.get('name')}: {resource} {got} allocated, {count} asked")
            if resource == f"{EXTENDED_PREFIX}cpu":
                exclusive_cpus += count
    if exclusive_cpus and phase == "Running":
        cpus = len(parse_cpuset(str(limits.get("cpuset") or "")))
        if cpus != exclusive_cpus:
            problems.append(f"cpuset {limits.get('cpuset')!r} has {cpus} CPUs, {exclusive_cpus} asked")
    container_limits = _container_limits(pod)
    if phase == "Running" and container_limits and all("cpu" in c for c in container_limits):
        millis = sum(to_amount("cpu", c["cpu"]) for c in container_limits)
        period = int(limits.get("cpu_period") or 100000)
        expected = str(max(1000, millis * period // 1000))
        if limits.get("cpu_quota") != expected:
            problems.append(f"cpu quota {limits.get('cpu_quota')}, {expected} expected for {millis}m")
    if phase == "Running" and container_limits and all("memory" in c for c in container_limits):
        expected = str(sum(to_amount("memory", c["memory"]) for c in container_limits))
        if limits.get("memory_limit") != expected:
            problems.append(f"memory limit {limits.get('memory_limit')}, {expected} expected")
    return problems
