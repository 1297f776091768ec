"""Pod admission as the kubelet's GeneralPredicates resource check does it.

A pod is admitted if, together with the pods already admitted and not yet terminated, it
fits the node's allocatable: the pod count, cpu and memory (requests), and every extended
resource it requests (allocatable from the registered device plugins' healthy devices).
A rejected pod gets phase Failed with reason `OutOf<resource>` (e.g. `OutOfcpu`,
`OutOfkubenode.io/gpu`) and the kubelet's message shape.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import psutil

from kubenode.model import Pod
from kubenode.model.quantity import format_amount
from kubenode.model.resources import CPU, MEMORY, PODS

DEFAULT_MAX_PODS = 110


@dataclass(frozen=True)
class Rejection:
    reason: str
    message: str


def host_allocatable(max_pods: int = DEFAULT_MAX_PODS) -> dict[str, int]:
    """cpu (millicores of the CPUs this process may use), memory (bytes) and pods of this machine."""
    cpus = len(os.sched_getaffinity(0))
    return {CPU: cpus * 1000, MEMORY: int(psutil.virtual_memory().total), PODS: max_pods}


def forbidden_sysctl(pod: Pod) -> Rejection | None:
    """The kubelet's sysctl admit handler, for process pods: they share the host's namespaces, so any sysctl,
    namespaced or not, would change the node; such a pod is refused rather than the host changed."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    context = (spec or {}).get("securityContext") if isinstance(spec, dict) else None
    for sysctl in (context or {}).get("sysctls") or [] if isinstance(context, dict) else []:
        name = sysctl.get("name") if isinstance(sysctl, dict) else sysctl
        return Rejection(
            "SysctlForbidden",
            f"forbidden sysctl: {name!r} cannot be set for a pod that shares the host's namespaces "
            "(a process pod): it would change the node",
        )
    return None


def admit(pod: Pod, active: Iterable[Pod], allocatable: Mapping[str, int]) -> Rejection | None:
    refused = forbidden_sysctl(pod)
    if refused is not None:
        return refused
    active = list(active)
    if len(active) + 1 > allocatable.get(PODS, DEFAULT_MAX_PODS):
        return Rejection(
            "OutOfpods", f"Node didn't have enough resource: pods, capacity: {allocatable.get(PODS)}"
        )
    used: dict[str, int] = {}
    for other in active:
        for name, amount in other.requests.items():
            used[name] = used.get(name, 0) + amount
    for name, amount in sorted(pod.requests.items()):
        if amount <= 0 or name == PODS:
            continue
        if name not in (CPU, MEMORY) and "/" not in name:
            continue  # ephemeral-storage, hugepages: not tracked by this agent
        capacity = allocatable.get(name, 0)
        if used.get(name, 0) + amount > capacity:
            return Rejection(
                f"OutOf{name}",
                f"Node didn't have enough resource: {name}, requested: {format_amount(name, amount)}, "
                f"used: {format_amount(name, used.get(name, 0))}, capacity: {format_amount(name, capacity)}",
            )
    return None
