"""The arithmetic of a Deployment rollout (kube's pkg/controller/deployment/util), on plain objects.

- `template_hash`: the `pod-template-hash` of a template (FNV-32a of its canonical JSON and the
  collisionCount, in kube's SafeEncodeString alphabet), which names and selects a ReplicaSet.
- `same_template`: kube's EqualIgnoreHash (templates equal but for that label).
- `revision`: the `deployment.kubernetes.io/revision` annotation; `max_revision` over ReplicaSets.
- `surge_and_unavailable`: maxSurge rounded up and maxUnavailable rounded down from the replicas, as
  ResolveFenceposts (both 0 makes maxUnavailable 1).
- `new_rs_replicas`, `old_rs_scale_down`: how far the new ReplicaSet may grow and the old ones shrink
  in one step of a rolling update, so that the total stays within replicas + maxSurge and the
  available count within replicas - maxUnavailable.
- `condition`/`set_condition`: DeploymentConditions with kube's reasons.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from controllers.framework import Obj, meta

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
CHANGE_CAUSE = "kubernetes.io/change-cause"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # kube's rand.SafeEncodeString alphabet


def template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    data = orjson.dumps(without_hash(template), option=orjson.OPT_SORT_KEYS)
    if collision_count:
        data += str(collision_count).encode()
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_ALPHABET[int(digit) % len(_ALPHABET)] for digit in str(value))


def without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    copy = dict(template)
    template_meta = dict(copy.get("metadata") or {})
    labels = {k: v for k, v in (template_meta.get("labels") or {}).items() if k != HASH_LABEL}
    if labels:
        template_meta["labels"] = labels
    else:
        template_meta.pop("labels", None)
    copy["metadata"] = template_meta
    return copy


def same_template(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return without_hash(a) == without_hash(b)


def revision(obj: Obj) -> int:
    text = (meta(obj).get("annotations") or {}).get(REVISION, "")
    return int(text) if str(text).isdigit() else 0


def max_revision(replica_sets: list[Obj]) -> int:
    return max((revision(rs) for rs in replica_sets), default=0)


def _resolve(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value or 0)


def surge_and_unavailable(deployment: Obj) -> tuple[int, int]:
    spec = deployment.get("spec") or {}
    replicas = int(spec.get("replicas") or 0)
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = _resolve(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # kube: a rollout must be able to make progress
    return surge, unavailable


def spec_replicas(obj: Obj) -> int:
    return int((obj.get("spec") or {}).get("replicas") or 0)


def status_count(obj: Obj, key: str) -> int:
    return int((obj.get("status") or {}).get(key) or 0)


def new_rs_replicas(deployment: Obj, all_rs: list[Obj], new_rs: Obj | None) -> int:
    """kube's NewRSNewReplicas for RollingUpdate: grow the new ReplicaSet as far as maxSurge allows."""
    replicas = spec_replicas(deployment)
    current_new = spec_replicas(new_rs) if new_rs else 0
    surge, _ = surge_and_unavailable(deployment)
    total = sum(spec_replicas(rs) for rs in all_rs)
    if total >= replicas + surge:
        return current_new
    return current_new + max(0, min(replicas + surge - total, replicas - current_new))


def condition(kind: str, status: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {
        "type": kind, "status": status, "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    }  # fmt: skip


def get_condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def set_condition(status: dict[str, Any], new: dict[str, Any]) -> None:
    """kube's SetDeploymentCondition: the same status and reason changes nothing; the same status with
    another reason keeps lastTransitionTime."""
    conditions = list(status.get("conditions") or [])
    for i, existing in enumerate(conditions):
        if existing.get("type") != new["type"]:
            continue
        if existing.get("status") == new["status"] and existing.get("reason") == new["reason"]:
            return
        if existing.get("status") == new["status"]:
            new["lastTransitionTime"] = existing.get("lastTransitionTime", new["lastTransitionTime"])
        conditions[i] = new
        status["conditions"] = conditions
        return
    conditions.append(new)
    status["conditions"] = conditions
