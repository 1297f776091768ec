"""Pods: kube's defaults and admission defaults, validation through the shared model, status rules,
graceful deletion, binding and eviction (k8s pkg/registry/core/pod and pkg/apis/core/v1/defaults.go).
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Mapping
from typing import Any

import orjson

from apiserver.registry.base import Cause, Strategy, value_repr
from apiserver.registry.podclaims import pod_claim_causes
from apiserver.registry.schema import format_time
from apiserver.status import APIError, conflict
from kubenode.model.errors import ValidationError

POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
    "spec.host",  # legacy alias of spec.nodeName
)
TERMINAL_PHASES = ("Succeeded", "Failed")
# Spec fields a pod update may change (ValidatePodUpdate): images, activeDeadlineSeconds, tolerations
# (additions), terminationGracePeriodSeconds (only to shorten it, here: any) and schedulingGates.
_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")
_PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
_DEFAULT_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _image_pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    tag = tail.partition(":")[2]
    return "Always" if not tag or tag == "latest" else "IfNotPresent"


def _default_container(container: dict[str, Any]) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if "imagePullPolicy" not in container and isinstance(container.get("image"), str):
        container["imagePullPolicy"] = _image_pull_policy(container["image"])
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, amount in limits.items():
            requests.setdefault(name, amount)
    for port in container.get("ports") or ():
        port.setdefault("protocol", "TCP")
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(probe_name)
        if isinstance(probe, dict):
            for key, value in _PROBE_DEFAULTS.items():
                probe.setdefault(key, value)


def _model_field(path: str) -> str:
    """The model's `...limits.cpu` path as kube prints it: `...limits[cpu]`."""
    return re.sub(r"\.(limits|requests|capacity|allocatable|overhead)\.(.+)$", r".\1[\2]", path)


def _lookup(obj: Any, path: str) -> object:
    """The value at a model field path (`spec.containers[0].image`), or None."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("[") and isinstance(obj, list):
            index = int(part[1:-1])
            obj = obj[index] if index < len(obj) else None
        elif isinstance(obj, Mapping):
            obj = obj.get(part)
        else:
            return None
    return obj


_TYPED = ("Required value", "Invalid value", "Duplicate value", "Forbidden", "Unsupported value", "Not found")


def model_cause(obj: Mapping[str, Any], error: ValidationError) -> Cause:
    """A shared-model ValidationError as kube's field error: `<field>: Invalid value: <v>: <detail>`."""
    message = error.message
    if message.startswith(_TYPED):
        reason = "FieldValueRequired" if message.startswith("Required") else "FieldValueInvalid"
        return _model_field(error.field), reason, message
    value = _lookup(obj, error.field)
    shown = value_repr(value) if isinstance(value, (str, int, float)) else ""
    return (
        _model_field(error.field),
        "FieldValueInvalid",
        f"Invalid value: {shown + ': ' if shown else ''}{message}",
    )


def condition(
    kind: str, status: str, now: datetime.datetime, reason: str = "", message: str = ""
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": format_time(now),
    }
    if reason:
        result["reason"] = reason
    if message:
        result["message"] = message
    return result


def set_condition(status: dict[str, Any], new: dict[str, Any]) -> None:
    """Replace the condition of new's type, keeping lastTransitionTime when the status is unchanged."""
    conditions = status.setdefault("conditions", [])
    for i, existing in enumerate(conditions):
        if existing.get("type") == new["type"]:
            if existing.get("status") == new["status"] and existing.get("lastTransitionTime"):
                new["lastTransitionTime"] = existing["lastTransitionTime"]
            conditions[i] = new
            return
    conditions.append(new)


def default_spec(spec: dict[str, Any]) -> None:
    """SetDefaults_PodSpec and SetDefaults_Container (pkg/apis/core/v1/defaults.go), the parts served."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, dict):
                _default_container(container)


class PodStrategy(Strategy):
    model = "V1Pod"
    field_labels = POD_FIELDS
    has_status = True
    returns_deleted_object = True

    def index(self, obj: Mapping[str, Any]) -> dict[str, str]:
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        node = str(spec.get("nodeName") or "")
        return {
            "spec.nodeName": node,
            "spec.host": node,
            "spec.restartPolicy": str(spec.get("restartPolicy") or ""),
            "spec.schedulerName": str(spec.get("schedulerName") or ""),
            "spec.serviceAccountName": str(spec.get("serviceAccountName") or ""),
            "spec.hostNetwork": "true" if spec.get("hostNetwork") else "false",
            "status.phase": str(status.get("phase") or ""),
            "status.podIP": str(status.get("podIP") or ""),
            "status.nominatedNodeName": str(status.get("nominatedNodeName") or ""),
        }

    def prepare_create(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        default_spec(spec)
        # Priority admission without a PriorityClass; DefaultTolerationSeconds admission (create only).
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        tolerations = spec.setdefault("tolerations", [])
        for key in _DEFAULT_TOLERATIONS:
            if not any(
                t.get("key") == key and t.get("effect") in ("NoExecute", None, "") for t in tolerations
            ):
                tolerations.append(
                    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                )
        obj["status"] = {"phase": "Pending"}

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        causes: list[Cause] = []
        for key in ("initContainers", "containers"):
            for i, container in enumerate(obj.get("spec", {}).get(key) or ()):
                if not container.get("image") and old is None:
                    causes.append((f"spec.{key}[{i}].image", "FieldValueRequired", "Required value"))
        causes += pod_claim_causes(obj)  # the DRA fields (podclaims.py)
        error, qos = check_spec(orjson.dumps(obj.get("spec") or {}, option=orjson.OPT_SORT_KEYS))
        if error is not None:
            causes.insert(0, model_cause(obj, error))
        elif old is None:
            obj["status"]["qosClass"] = qos
        return causes

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        old_spec = old.get("spec") or {}
        new_spec = new.setdefault("spec", {})
        default_spec(
            new_spec
        )  # the decoder defaults every body, so a manifest without defaults compares equal
        for key in ("priority", "preemptionPolicy"):  # set by admission on create; kept
            if key in old_spec:
                new_spec.setdefault(key, old_spec[key])
        if _comparable_spec(new_spec) != _comparable_spec(old_spec):
            name = old.get("metadata", {}).get("name", "")
            raise _forbidden_spec_change(name)

    def prepare_status_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_status_update(new, old)
        status = new.setdefault("status", {})
        old_qos = (old.get("status") or {}).get("qosClass")
        if old_qos:
            status["qosClass"] = old_qos  # immutable; back-filled when a writer drops it

    def delete_grace(self, obj: Mapping[str, Any], requested: int | None) -> int:
        """CheckGracefulDelete: the request's grace, else the pod's; 0 for unbound or terminal pods."""
        spec = obj.get("spec") or {}
        grace = requested if requested is not None else int(spec.get("terminationGracePeriodSeconds", 30))
        if grace < 0:
            grace = 1
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return 0
        return grace


@functools.lru_cache(maxsize=512)
def check_spec(spec_json: bytes) -> tuple[ValidationError | None, str]:
    """The shared model's validation of a pod spec, and its QoS class. Cached by the spec's JSON:
    pods made from one template (a ReplicaSet, a benchmark) repeat a spec, and the model's parse
    (quantities as exact fractions) is the largest cost of a create."""
    from kubenode.model.parse import parse_pod

    stub = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": orjson.loads(spec_json)}
    try:
        return None, str(parse_pod(stub).qos_class)
    except ValidationError as exc:
        return exc, ""


def _comparable_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    result = {k: v for k, v in spec.items() if k not in _MUTABLE_SPEC}
    for key in ("containers", "initContainers"):
        if key in result:
            result[key] = [{k: v for k, v in c.items() if k != "image"} for c in result[key]]
    return result


def _forbidden_spec_change(name: str) -> APIError:
    from apiserver.status import invalid

    return invalid(
        "Pod",
        name,
        [
            (
                "spec",
                "FieldValueForbidden",
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                "(allow it to be set to 1 if it was previously negative)",
            )
        ],
    )


def bind(pod: dict[str, Any], node_name: str, annotations: Mapping[str, str], now: datetime.datetime) -> None:
    """Apply a Binding: spec.nodeName, the Binding's annotations, PodScheduled=True (409 when it cannot)."""
    meta = pod.get("metadata", {})
    name = meta.get("name", "")
    if meta.get("deletionTimestamp"):
        raise conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
    current = (pod.get("spec") or {}).get("nodeName")
    if current:
        raise conflict("pods/binding", name, f'pod {name} is already assigned to node "{current}"')
    if (pod.get("spec") or {}).get("schedulingGates"):
        raise conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
    pod.setdefault("spec", {})["nodeName"] = node_name
    if annotations:
        meta.setdefault("annotations", {}).update(annotations)
    set_condition(pod.setdefault("status", {}), condition("PodScheduled", "True", now))
