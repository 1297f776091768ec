"""Pods as the workload controllers see them: owner references, readiness, making and ranking pods.

`controller_ref`/`owner_ref` build and read metav1.OwnerReference; `pod_from_template` is kube's
GetPodFromTemplate (generateName `<owner>-`, the template's labels and annotations, the owner as
controller); `is_active`, `is_ready`, `is_available` are kube's podutil; `deletion_rank` orders pods
for a scale-down as kube's ActivePods sort (unassigned, pending, not ready, newer first).
`adopt_patch`/`release_patch` are the ownerReferences patches of kube's ControllerRefManager.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controllers.framework import Obj, meta
from kubenode.kubeclient.timefmt import parse_time
from kubenode.labelselector import matches

TERMINAL = ("Succeeded", "Failed")


def owner_ref(owner: Obj, *, controller: bool = True) -> dict[str, Any]:
    m = meta(owner)
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": m.get("name", ""),
        "uid": m.get("uid", ""),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    return next((r for r in meta(obj).get("ownerReferences") or [] if r.get("controller")), None)


def owned_by(obj: Obj, owner: Obj) -> bool:
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == meta(owner).get("uid")


def pod_from_template(owner: Obj, template: Mapping[str, Any], extra_labels: Mapping[str, str] = {}) -> Obj:
    template_meta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {
        "generateName": f"{meta(owner).get('name')}-",
        "namespace": meta(owner).get("namespace"),
        "labels": {**(template_meta.get("labels") or {}), **extra_labels},
        "ownerReferences": [owner_ref(owner)],
    }
    if template_meta.get("annotations"):
        pod_meta["annotations"] = dict(template_meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": dict(template.get("spec") or {})}


def is_active(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL and not meta(pod).get("deletionTimestamp")


def _ready_condition(pod: Obj) -> Mapping[str, Any] | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), None)


def is_ready(pod: Obj) -> bool:
    condition = _ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def is_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """Ready for at least minReadySeconds (podutil.IsPodAvailable)."""
    if not is_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = seconds((_ready_condition(pod) or {}).get("lastTransitionTime"))
    return since is not None and since + min_ready_seconds <= now


_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def deletion_rank(pod: Obj) -> tuple[int, int, int, float]:
    """Smaller first: which pods a scale-down removes (kube's controller.ActivePods Less)."""
    stamp = seconds(meta(pod).get("creationTimestamp")) or 0.0
    return (
        1 if (pod.get("spec") or {}).get("nodeName") else 0,
        _PHASE_RANK.get(str((pod.get("status") or {}).get("phase")), 0),
        1 if is_ready(pod) else 0,
        -stamp,
    )


def adopt_patch(owner: Obj, pod: Obj) -> dict[str, Any]:
    return {"metadata": {"ownerReferences": [owner_ref(owner)], "uid": meta(pod).get("uid")}}


def release_patch(owner: Obj, pod: Obj) -> dict[str, Any]:
    ref = {"$patch": "delete", "uid": meta(owner).get("uid")}
    return {"metadata": {"ownerReferences": [ref], "uid": meta(pod).get("uid")}}


def claim(
    owner: Obj, selector: Mapping[str, Any] | None, pods: Iterable[Obj]
) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """kube's ClaimPods: (owned and matching, orphans to adopt, owned but no longer matching: to release).
    An owner being deleted adopts nothing."""
    owned: list[Obj] = []
    adopt: list[Obj] = []
    release: list[Obj] = []
    deleting = bool(meta(owner).get("deletionTimestamp"))
    for pod in pods:
        labels = meta(pod).get("labels") or {}
        ref = controller_ref(pod)
        if ref is not None:
            if ref.get("uid") != meta(owner).get("uid"):
                continue
            (owned if matches(selector, labels) else release).append(pod)
        elif matches(selector, labels) and not deleting and not meta(pod).get("deletionTimestamp"):
            adopt.append(pod)
    return owned, adopt, release


def seconds(text: Any) -> float | None:
    """An RFC 3339 time as epoch seconds; None when missing or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse_time(text)
    except ValueError:
        return None


class Expectations:
    """kube's ControllerExpectations: creations and deletions a controller asked for and has not yet seen
    in its informer. A key whose expectations are pending is not synced into more writes; they expire
    after `ttl` (kube: 5 minutes) in case a watch event was lost."""

    def __init__(self, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._pending: dict[str, tuple[int, int, float]] = {}
        self._lock = threading.Lock()

    def expect(self, key: str, adds: int, deletes: int) -> None:
        with self._lock:
            self._pending[key] = (adds, deletes, self.clock())

    def _lower(self, key: str, adds: int, deletes: int) -> None:
        with self._lock:
            if key in self._pending:
                a, d, when = self._pending[key]
                self._pending[key] = (a - adds, d - deletes, when)

    def created(self, key: str) -> None:
        self._lower(key, 1, 0)

    def deleted(self, key: str) -> None:
        self._lower(key, 0, 1)

    def satisfied(self, key: str) -> bool:
        with self._lock:
            entry = self._pending.get(key)
        if entry is None:
            return True
        adds, deletes, when = entry
        return (adds <= 0 and deletes <= 0) or self.clock() - when > self.ttl

    def forget(self, key: str) -> None:
        with self._lock:
            self._pending.pop(key, None)
