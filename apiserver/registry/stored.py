"""The kinds served for kube's own control plane (resources.py STORED): volumes and storage, PDBs,
ReplicationControllers, StatefulSets and ControllerRevisions, DeviceTaintRules.

Each is decoded against the official client's model (unknown fields and wrong JSON types as for every
kind), keeps its status on a main update and its spec on a /status update where it has one, and bumps
`metadata.generation` when its spec changes, as kube's strategies do. kube's deeper validation of these
kinds is not repeated here: kubenode's own components never write them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import Clock, Strategy, utc_now
from apiserver.resources import STORED, ResourceInfo

# kinds whose strategy sets metadata.generation on create (kube's PrepareForCreate)
_GENERATION = {
    "ReplicationController", "StatefulSet", "PodDisruptionBudget", "DeviceTaintRule", "CronJob",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}  # fmt: skip


class StoredStrategy(Strategy):
    def __init__(self, info: ResourceInfo, clock: Clock = utc_now) -> None:
        super().__init__(info, clock)
        self.model = f"{info.version.capitalize()}{info.kind}"
        self.has_status = info.subresource("status") is not None

    def prepare_create(self, obj: dict[str, Any]) -> None:
        if self.info.kind in ("PersistentVolume", "PersistentVolumeClaim"):
            obj["status"] = {"phase": "Pending"}  # kube's PV and PVC PrepareForCreate
        elif self.has_status:
            obj.pop("status", None)
        if self.info.kind in _GENERATION:
            obj.setdefault("metadata", {})["generation"] = 1
        self._default(obj)

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        self._default(new)

    def _default(self, obj: dict[str, Any]) -> None:
        """kube's SetDefaults_<Kind> of the pointer fields its controllers dereference."""
        spec = obj.get("spec")
        if self.info.kind == "PriorityClass":
            obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
        elif self.info.kind == "CronJob" and isinstance(spec, dict):
            spec.setdefault("concurrencyPolicy", "Allow")
            spec.setdefault("suspend", False)
            spec.setdefault("successfulJobsHistoryLimit", 3)
            spec.setdefault("failedJobsHistoryLimit", 1)
        elif self.info.kind == "ReplicationController" and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
            if labels and not spec.get("selector"):
                spec["selector"] = dict(labels)
            meta = obj.setdefault("metadata", {})
            if labels and not meta.get("labels"):
                meta["labels"] = dict(labels)


def stored_strategies(clock: Clock = utc_now) -> dict[str, Strategy]:
    return {info.plural: StoredStrategy(info, clock) for info in STORED}
