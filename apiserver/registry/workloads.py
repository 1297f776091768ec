"""apps/v1 Deployments, ReplicaSets and DaemonSets, batch/v1 Jobs, core/v1 ServiceAccounts.

Each strategy does what kube's pkg/registry/{apps,batch} strategy and the v1 defaulters do: defaults
(`SetDefaults_Deployment` and friends, the pod template's defaults as a pod's), generation 1 on create
and +1 on each spec change, status reset on create and kept on a main-resource update, and kube's
validation with its messages: a selector that is required, non-empty and matches the template's
labels, immutable after create (a Job's template too), the restart policies each kind allows, and the
rolling-update knobs. A Job's selector is generated from its uid unless `manualSelector` is set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from apiserver.registry.base import Cause, Strategy, value_repr
from apiserver.registry.pods import check_spec, default_spec, model_cause
from kubenode.labelselector import is_empty, matches, selector_problem

JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_LABELS = ("controller-uid", "job-name")


def _go_map(labels: Mapping[str, Any]) -> str:
    return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items())) + "}"


def _go_selector(selector: Mapping[str, Any]) -> str:
    labels = selector.get("matchLabels")
    shown = _go_map(labels) if labels else "map[string]string(nil)"
    return f"v1.LabelSelector{{MatchLabels:{shown}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}}"


def _int_or_percent(value: Any, total: int = 100) -> int | None:
    """An IntOrString's value ("25%" of 100 is 25), None when it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return int(value[:-1]) * total // 100
    return None


def check_int_or_percent(path: str, value: Any) -> list[Cause]:
    amount = _int_or_percent(value)
    if value is None:
        return []
    if amount is None:
        return [(path, "FieldValueInvalid", f"Invalid value: {value_repr(value)}: must be an integer or "
                 "percentage (e.g '5%')")]  # fmt: skip
    if amount < 0:
        return [(path, "FieldValueInvalid", f"Invalid value: {value_repr(value)}: must be greater than or "
                 "equal to 0")]  # fmt: skip
    if isinstance(value, str) and amount > 100:
        return [(path, "FieldValueInvalid", f"Invalid value: {value_repr(value)}: must not be greater than "
                 "100%")]  # fmt: skip
    return []


def is_zero(value: Any) -> bool:
    return _int_or_percent(value if value is not None else 0) == 0


class WorkloadStrategy(Strategy):
    """What the four workload kinds share: a selector over a pod template, a status, a generation."""

    has_status = True
    restart_policies: tuple[str, ...] = ("Always",)
    immutable_template = False
    # The status a new object starts with: the fields kube's types always write (no omitempty).
    initial_status: Mapping[str, int] = {}

    def default(self, spec: dict[str, Any]) -> None:
        """The kind's own defaults (SetDefaults_<Kind>), after the template's."""

    def prepare_create(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["generation"] = 1
        obj["status"] = dict(self.initial_status)
        spec = obj.setdefault("spec", {})
        self._default_template(spec)
        self.default(spec)

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        spec = new.setdefault("spec", {})
        self._default_template(spec)
        self.default(spec)

    @staticmethod
    def _default_template(spec: dict[str, Any]) -> None:
        template = spec.setdefault("template", {})
        default_spec(template.setdefault("spec", {}))

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        causes = self._validate_selector(spec, old)
        causes += self._validate_template(template)
        replicas = spec.get("replicas")
        if isinstance(replicas, int) and replicas < 0:
            message = f"Invalid value: {replicas}: must be greater than or equal to 0"
            causes.append(("spec.replicas", "FieldValueInvalid", message))
        if (
            old is not None
            and self.immutable_template
            and template != (old.get("spec") or {}).get("template")
        ):
            causes.append(("spec.template", "FieldValueInvalid", "Invalid value: core.PodTemplateSpec{...}: "
                           "field is immutable"))  # fmt: skip
        return causes

    def _validate_selector(self, spec: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        selector = spec.get("selector")
        if selector is None:
            return [("spec.selector", "FieldValueRequired", "Required value")]
        problem = selector_problem(selector)
        if problem:
            return [
                ("spec.selector", "FieldValueInvalid", f"Invalid value: {_go_selector(selector)}: {problem}")
            ]
        if is_empty(selector):
            message = f"empty selector is invalid for {self.info.singular}"
            return [
                ("spec.selector", "FieldValueInvalid", f"Invalid value: {_go_selector(selector)}: {message}")
            ]
        causes: list[Cause] = []
        old_selector = ((old or {}).get("spec") or {}).get("selector")
        if old is not None and selector != old_selector:
            message = f"Invalid value: {_go_selector(selector)}: field is immutable"
            causes.append(("spec.selector", "FieldValueInvalid", message))
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not matches(selector, labels):
            message = f"Invalid value: {_go_map(labels)}: `selector` does not match template `labels`"
            causes.append(("spec.template.metadata.labels", "FieldValueInvalid", message))
        return causes

    def _validate_template(self, template: Mapping[str, Any]) -> list[Cause]:
        pod_spec = template.get("spec") or {}
        causes: list[Cause] = []
        policy = pod_spec.get("restartPolicy")
        if policy not in self.restart_policies:
            supported = ", ".join(f'"{p}"' for p in self.restart_policies)
            message = f"Unsupported value: {value_repr(policy)}: supported values: {supported}"
            causes.append(("spec.template.spec.restartPolicy", "FieldValueNotSupported", message))
        containers = pod_spec.get("containers") or []
        if not containers:
            causes.append(("spec.template.spec.containers", "FieldValueRequired", "Required value"))
            return causes
        for key in ("initContainers", "containers"):
            for i, container in enumerate(pod_spec.get(key) or ()):
                if not container.get("image"):
                    causes.append(
                        (f"spec.template.spec.{key}[{i}].image", "FieldValueRequired", "Required value")
                    )
        error, _ = check_spec(orjson.dumps(pod_spec, option=orjson.OPT_SORT_KEYS))
        if error is not None:
            field, reason, message = model_cause({"spec": pod_spec}, error)
            causes.append((f"spec.template.{field}", reason, message))
        return causes


class DeploymentStrategy(WorkloadStrategy):
    model = "V1Deployment"

    def default(self, spec: dict[str, Any]) -> None:
        spec.setdefault("replicas", 1)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        spec = obj.get("spec") or {}
        causes = super().validate(obj, old)
        strategy = spec.get("strategy") or {}
        kind = strategy.get("type")
        rolling = strategy.get("rollingUpdate")
        if kind not in ("RollingUpdate", "Recreate"):
            message = f'Unsupported value: {value_repr(kind)}: supported values: "Recreate", "RollingUpdate"'
            causes.append(("spec.strategy.type", "FieldValueNotSupported", message))
        elif kind == "Recreate" and rolling is not None:
            message = "Forbidden: may not be specified when strategy `type` is 'Recreate'"
            causes.append(("spec.strategy.rollingUpdate", "FieldValueForbidden", message))
        elif kind == "RollingUpdate" and rolling is not None:
            surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
            causes += check_int_or_percent("spec.strategy.rollingUpdate.maxSurge", surge)
            causes += check_int_or_percent("spec.strategy.rollingUpdate.maxUnavailable", unavailable)
            if is_zero(surge) and is_zero(unavailable):
                message = f"Invalid value: {value_repr(unavailable)}: may not be 0 when `maxSurge` is 0"
                causes.append(("spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid", message))
        deadline = spec.get("progressDeadlineSeconds")
        minimum = spec.get("minReadySeconds") or 0
        if isinstance(deadline, int) and deadline <= minimum:
            message = f"Invalid value: {deadline}: must be greater than minReadySeconds"
            causes.append(("spec.progressDeadlineSeconds", "FieldValueInvalid", message))
        return causes


class ReplicaSetStrategy(WorkloadStrategy):
    model = "V1ReplicaSet"
    initial_status: Mapping[str, int] = {"replicas": 0}

    def default(self, spec: dict[str, Any]) -> None:
        spec.setdefault("replicas", 1)


class DaemonSetStrategy(WorkloadStrategy):
    model = "V1DaemonSet"
    initial_status: Mapping[str, int] = {
        "currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0,
    }  # fmt: skip

    def default(self, spec: dict[str, Any]) -> None:
        strategy = spec.setdefault("updateStrategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
        spec.setdefault("revisionHistoryLimit", 10)

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        strategy = (obj.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type") not in ("RollingUpdate", "OnDelete"):
            message = (
                f"Unsupported value: {value_repr(strategy.get('type'))}: supported values: "
                '"OnDelete", "RollingUpdate"'
            )
            causes.append(("spec.updateStrategy.type", "FieldValueNotSupported", message))
        rolling = strategy.get("rollingUpdate") or {}
        surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
        causes += check_int_or_percent("spec.updateStrategy.rollingUpdate.maxSurge", surge)
        causes += check_int_or_percent("spec.updateStrategy.rollingUpdate.maxUnavailable", unavailable)
        if strategy.get("type") == "RollingUpdate" and is_zero(surge) and is_zero(unavailable):
            message = f"Invalid value: {value_repr(unavailable)}: cannot be 0 when maxSurge is 0"
            causes.append(("spec.updateStrategy.rollingUpdate.maxUnavailable", "FieldValueInvalid", message))
        return causes


class JobStrategy(WorkloadStrategy):
    model = "V1Job"
    restart_policies = ("OnFailure", "Never")
    immutable_template = True
    default_propagation = "Orphan"  # batch/v1 keeps its pods when the client names no policy, as kube

    def prepare_create(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        if not spec.get("manualSelector"):
            # generateSelector: the Job's uid selects its pods, whatever the client sent.
            meta = obj["metadata"]
            uid, name = meta["uid"], meta.get("name", "")
            template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
            labels = template_meta.setdefault("labels", {})
            labels.update({JOB_UID_LABEL: uid, JOB_NAME_LABEL: name, "controller-uid": uid, "job-name": name})
            if spec.get("selector") is None:
                spec["selector"] = {"matchLabels": {JOB_UID_LABEL: uid}}
        super().prepare_create(obj)

    def default(self, spec: dict[str, Any]) -> None:
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        causes = super().validate(obj, old)
        spec = obj.get("spec") or {}
        for key in (
            "parallelism",
            "completions",
            "backoffLimit",
            "activeDeadlineSeconds",
            "ttlSecondsAfterFinished",
        ):
            value = spec.get(key)
            if isinstance(value, int) and (value < 0 or (key == "activeDeadlineSeconds" and value == 0)):
                bound = "greater than 0" if key == "activeDeadlineSeconds" else "greater than or equal to 0"
                causes.append(
                    (f"spec.{key}", "FieldValueInvalid", f"Invalid value: {value}: must be {bound}")
                )
        if spec.get("completionMode") not in ("NonIndexed", "Indexed"):
            message = (
                f"Unsupported value: {value_repr(spec.get('completionMode'))}: supported values: "
                '"NonIndexed", "Indexed"'
            )
            causes.append(("spec.completionMode", "FieldValueNotSupported", message))
        old_spec = (old or {}).get("spec") or {}
        if old is not None and spec.get("completions") != old_spec.get("completions"):
            message = f"Invalid value: {value_repr(spec.get('completions'))}: field is immutable"
            causes.append(("spec.completions", "FieldValueInvalid", message))
        return causes


class ServiceAccountStrategy(Strategy):
    model = "V1ServiceAccount"
    returns_deleted_object = True


class StatefulSetStrategy(WorkloadStrategy):
    """apps/v1 StatefulSet with kube's SetDefaults_StatefulSet (v1.37, MaxUnavailableStatefulSet on): the real
    kube-controller-manager dereferences revisionHistoryLimit, and a StatefulSet without it panicked the whole
    process (statefulset truncateHistory)."""

    model = "V1StatefulSet"
    initial_status: Mapping[str, int] = {"replicas": 0, "availableReplicas": 0}

    def default(self, spec: dict[str, Any]) -> None:
        spec.setdefault("podManagementPolicy", "OrderedReady")
        strategy = spec.setdefault("updateStrategy", {})
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            strategy.setdefault("rollingUpdate", {})
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            rolling.setdefault("partition", 0)
            rolling.setdefault("maxUnavailable", 1)
        retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
