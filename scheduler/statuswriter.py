"""What the scheduler writes back when a pod cannot be placed (kube's handleSchedulingFailure).

For every failed attempt:
- a Warning `FailedScheduling` event with the FitError text (the recorder aggregates repeats
  into one Event whose count rises, as client-go's does);
- a strategic-merge PATCH of pods/{p}/status, with the pod's uid as precondition, setting
  PodScheduled=False with reason Unschedulable (SchedulerError for errors) and the message,
  plus status.nominatedNodeName when preemption nominated a node. The PATCH is sent only
  when the condition's reason or message, or the nomination, differs from what the pod
  already shows (or what this writer last sent), as kube's updatePod skips no-op writes.

Writes run on a small pool of their own, so the scheduling cycle never waits for them; a
failed write is logged and dropped (the next attempt writes again).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubenode.kubeclient import PODS, KubeClient, KubeError, NotFound
from kubenode.kubeclient.events import WARNING, EventRecorder
from kubenode.kubeclient.timefmt import rfc3339
from kubenode.model.objects import Pod
from scheduler.apibinder import ApiWriter, NotLeading, pod_reference

log = logging.getLogger(__name__)

UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"


def pod_scheduled_condition(pod_raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = pod_raw.get("status")
    if not isinstance(status, Mapping):
        return None
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            return condition
    return None


def failure_patch(pod: Pod, reason: str, message: str, nominated: str, now: float) -> dict[str, Any]:
    old = pod_scheduled_condition(pod.raw) or {}
    # lastTransitionTime moves only when the condition's status does (UpdatePodCondition).
    since = old.get("lastTransitionTime") if old.get("status") == "False" else None
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": since or rfc3339(now),
    }
    status: dict[str, Any] = {"conditions": [condition]}
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"metadata": {"uid": pod.uid}, "status": status}


class StatusWriter(ApiWriter):
    def __init__(
        self, client: KubeClient, recorder: EventRecorder, *, workers: int = 2, **options: Any
    ) -> None:
        super().__init__(client, recorder, **options)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kubenode-status")
        self._lock = threading.Lock()
        self._sent: dict[str, tuple[str, str, str, str]] = {}  # key -> (uid, reason, message, nominated)
        self.patches = 0

    def failed(self, pod: Pod, message: str, nominated: str = "", *, error: bool = False) -> None:
        """Report one failed attempt: the event now, the status PATCH if it changes anything."""
        if not self.may_act():
            return
        self.recorder.event(pod_reference(pod), WARNING, "FailedScheduling", message)
        reason = SCHEDULER_ERROR if error else UNSCHEDULABLE
        nominated = nominated or pod.nominated_node_name
        wanted = (pod.uid, reason, message, nominated)
        current = pod_scheduled_condition(pod.raw) or {}
        shown = (
            pod.uid,
            str(current.get("reason") or ""),
            str(current.get("message") or ""),
            pod.nominated_node_name,
        )
        with self._lock:
            shown_already = wanted == shown and current.get("status") == "False"
            if shown_already or self._sent.get(pod.key) == wanted:
                return
            self._sent[pod.key] = wanted
        self._pool.submit(self._patch, pod, reason, message, nominated)

    def _patch(self, pod: Pod, reason: str, message: str, nominated: str) -> None:
        try:
            if not self.may_act():
                raise NotLeading("not the leader")
            patch = failure_patch(pod, reason, message, nominated, self._wall())
            self.client.patch(PODS, pod.name, patch, pod.namespace, subresource="status")
            self.patches += 1
        except NotFound:
            self.forget(pod.key)  # deleted meanwhile
        except (KubeError, NotLeading) as exc:
            log.warning("updating the status of pod %s: %s", pod.key, exc)
            self.forget(pod.key)  # let the next attempt try again

    def forget(self, key: str) -> None:
        with self._lock:
            self._sent.pop(key, None)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
