"""The Priority admission plugin (kube's plugin/pkg/admission/priority) on pod creation, and the system
PriorityClasses kube-apiserver creates at start (pkg/apis/scheduling/v1 SystemPriorityClasses).

A pod naming `priorityClassName` gets that class's value as `spec.priority` and its `preemptionPolicy`
(403 when no such class exists, or when the pod carries a different value of either, in kube's words). A
pod naming none gets the global default class (the lowest-valued one if several claim it), else priority 0
and PreemptLowerPriority. The real kube-scheduler orders and preempts by `spec.priority` alone.
(A PriorityClass's default `preemptionPolicy` is registry/stored.py's.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from apiserver.request import RequestInfo
from apiserver.status import forbidden

PREEMPT_LOWER = "PreemptLowerPriority"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_PRIORITY_CLASSES = (
    ("system-node-critical", SYSTEM_CRITICAL_PRIORITY + 1000,
     "Used for system critical pods that must not be moved from their current node."),
    ("system-cluster-critical", SYSTEM_CRITICAL_PRIORITY,
     "Used for system critical pods that must run in the cluster, but can be moved to another node if "
     "necessary."),
)  # fmt: skip

ClassLookup = Callable[[str], Mapping[str, Any] | None]
ClassList = Callable[[], Iterable[Mapping[str, Any]]]


def system_priority_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "description": description,
            "preemptionPolicy": PREEMPT_LOWER,
        }
        for name, value, description in SYSTEM_PRIORITY_CLASSES
    ]


class PriorityAdmission:
    def __init__(self, lookup: ClassLookup, classes: ClassList) -> None:
        self._lookup = lookup
        self._classes = classes

    def _default_class(self) -> Mapping[str, Any] | None:
        chosen: Mapping[str, Any] | None = None
        for item in self._classes():
            if item.get("globalDefault") and (
                chosen is None or item.get("value", 0) < chosen.get("value", 0)
            ):
                chosen = item
        return chosen

    def mutate(self, user: Any, info: RequestInfo, obj: dict[str, Any]) -> None:
        if info.resource != "pods" or info.api_group != "" or info.subresource or info.verb != "create":
            return
        spec = obj.setdefault("spec", {})
        pod_name = (obj.get("metadata") or {}).get("name", "")
        wanted = str(spec.get("priorityClassName") or "")
        if wanted:
            found = self._lookup(wanted)
            if found is None:
                raise forbidden(
                    f'pods "{pod_name}" is forbidden: no PriorityClass with name {wanted} was found'
                )
        else:
            found = self._default_class()
        name = str((found.get("metadata") or {}).get("name", "")) if found is not None else ""
        value = int(found.get("value", 0)) if found is not None else 0
        policy = str(found.get("preemptionPolicy") or PREEMPT_LOWER) if found is not None else PREEMPT_LOWER
        if name:
            spec["priorityClassName"] = name
        given = spec.get("priority")
        if given is not None and given != value:
            raise forbidden(
                f'pods "{pod_name}" is forbidden: the integer value of priority ({given}) must not be '
                f"provided in pod spec; priority admission controller computed {value} from the given "
                "PriorityClass name"
            )
        spec["priority"] = value
        given_policy = spec.get("preemptionPolicy")
        if given_policy and given_policy != policy:
            raise forbidden(
                f'pods "{pod_name}" is forbidden: the string value of PreemptionPolicy ({given_policy}) '
                f"must not be provided in pod spec; priority admission controller computed {policy} from the "
                "given PriorityClass name"
            )
        spec["preemptionPolicy"] = policy
