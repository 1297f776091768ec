"""Nodes, namespaces, events and leases: their defaults, selectable fields and validation."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import Cause, Strategy
from apiserver.registry.pods import model_cause
from apiserver.registry.schema import parse_time
from kubenode.model.errors import ValidationError

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Namespaces kube-apiserver refuses to delete (it answers 403 Forbidden).
UNDELETABLE_NAMESPACES = ("default", "kube-system", "kube-public")
EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)


class NodeStrategy(Strategy):
    model = "V1Node"
    field_labels = ("spec.unschedulable",)
    has_status = True

    def index(self, obj: Mapping[str, Any]) -> dict[str, str]:
        return {"spec.unschedulable": "true" if (obj.get("spec") or {}).get("unschedulable") else "false"}

    def prepare_create(self, obj: dict[str, Any]) -> None:
        self._default_allocatable(obj)

    def prepare_status_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_status_update(new, old)
        self._default_allocatable(new)

    @staticmethod
    def _default_allocatable(obj: dict[str, Any]) -> None:
        status = obj.get("status")
        if isinstance(status, dict) and status.get("capacity") and "allocatable" not in status:
            status["allocatable"] = dict(status["capacity"])

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        from kubenode.model.parse import parse_node

        try:
            parse_node(obj)
        except ValidationError as exc:
            return [model_cause(obj, exc)]
        return _node_update_causes(obj, old) if old is not None else []


def _pod_cidrs(node: Mapping[str, Any]) -> list[str]:
    spec = node.get("spec") or {}
    cidrs = [str(c) for c in spec.get("podCIDRs") or []]
    single = str(spec.get("podCIDR") or "")
    if single and (not cidrs or cidrs[0] != single):
        cidrs = [single, *cidrs]  # kube's conversion: podCIDR is podCIDRs[0]
    return cidrs


def _node_update_causes(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """kube's ValidateNodeUpdate: podCIDRs and providerID go from "" to a value once, never change."""
    causes: list[Cause] = []
    before = _pod_cidrs(old)
    if before and before != _pod_cidrs(new):
        why = 'Forbidden: node updates may not change podCIDR except from "" to valid'
        causes.append(("spec.podCIDRs", "FieldValueForbidden", why))
    provider = str((old.get("spec") or {}).get("providerID") or "")
    if provider and provider != str((new.get("spec") or {}).get("providerID") or ""):
        why = 'Forbidden: node updates may not change providerID except from "" to valid'
        causes.append(("spec.providerID", "FieldValueForbidden", why))
    return causes


class NamespaceStrategy(Strategy):
    model = "V1Namespace"
    field_labels = ("status.phase",)
    has_status = True
    name_is_label = True

    def index(self, obj: Mapping[str, Any]) -> dict[str, str]:
        return {"status.phase": str((obj.get("status") or {}).get("phase") or "")}

    def prepare_create(self, obj: dict[str, Any]) -> None:
        obj["status"] = {"phase": "Active"}
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        self._name_label(obj)

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        new["spec"] = old.get("spec", {})
        self._name_label(new)

    @staticmethod
    def _name_label(obj: dict[str, Any]) -> None:
        meta = obj.setdefault("metadata", {})
        labels = meta.get("labels") or {}
        labels[NAMESPACE_NAME_LABEL] = meta.get("name", "")
        meta["labels"] = labels


class EventStrategy(Strategy):
    model = "CoreV1Event"
    field_labels = EVENT_FIELDS

    def index(self, obj: Mapping[str, Any]) -> dict[str, str]:
        involved = obj.get("involvedObject") or {}
        source = (obj.get("source") or {}).get("component") or obj.get("reportingComponent") or ""
        fields = {
            f"involvedObject.{k}": str(involved.get(k) or "")
            for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        }
        fields.update(
            reason=str(obj.get("reason") or ""),
            reportingComponent=str(obj.get("reportingComponent") or ""),
            source=str(source),
            type=str(obj.get("type") or ""),
        )
        return fields

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        involved = obj.get("involvedObject") or {}
        namespace = obj.get("metadata", {}).get("namespace", "")
        if involved.get("namespace") and involved["namespace"] != namespace:
            return [
                (
                    "involvedObject.namespace",
                    "FieldValueInvalid",
                    f'Invalid value: "{involved["namespace"]}": does not match event.namespace',
                )
            ]
        return []


def event_last_seen(obj: Mapping[str, Any]) -> datetime.datetime | None:
    """When an event last happened: its newest timestamp (kube refreshes the event's TTL on update)."""
    candidates = (
        obj.get("lastTimestamp"),
        obj.get("eventTime"),
        (obj.get("series") or {}).get("lastObservedTime"),
        (obj.get("metadata") or {}).get("creationTimestamp"),
    )
    moments = [parse_time(value) for value in candidates if isinstance(value, str)]
    return max((m for m in moments if m is not None), default=None)


class LeaseStrategy(Strategy):
    model = "V1Lease"

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        spec = obj.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and duration <= 0:
            return [
                (
                    "spec.leaseDurationSeconds",
                    "FieldValueInvalid",
                    f"Invalid value: {duration}: must be greater than 0",
                )
            ]
        transitions = spec.get("leaseTransitions")
        if transitions is not None and transitions < 0:
            return [
                (
                    "spec.leaseTransitions",
                    "FieldValueInvalid",
                    f"Invalid value: {transitions}: must be greater than or equal to 0",
                )
            ]
        return []
