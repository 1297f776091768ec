"""The engine's Binder through the API server: bind by pods/binding, preempt by status + delete.

bind (`bind_async`: sent from the scheduling cycle, answered on the client's reactor thread;
`bind` on the engine's binding pool when an extender binder wraps this one):
  POST /api/v1/namespaces/{ns}/pods/{name}/binding with kube's DefaultBinder body (pod uid,
  target Node). The answer is a Status (201), which the raw client does not try to read as
  a Binding (the official client does, and fails: kubernetes-client/python #547).
  409 "already assigned to node X" is not an error: the pod is bound, and the pod informer
  will report where; only a bind to our node records the event. Any other failure raises,
  so the engine forgets the pod and requeues it with backoff. Success records Normal
  `Scheduled` "Successfully assigned ns/pod to node".
evict (in the cycle that chose the victims, as kube-scheduler before async preemption):
  PATCH the victim's status with DisruptionTarget=True reason PreemptionByScheduler, then
  DELETE it with its own terminationGracePeriodSeconds and a uid precondition, and record
  Normal `Preempted` on it. A victim already gone counts as evicted.
Both refuse to act unless `may_act()` (leadership) holds, so a scheduler that lost its
Lease writes nothing more.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from kubenode.kubeclient import PODS, Conflict, KubeClient, KubeError, NotFound
from kubenode.kubeclient.events import NORMAL, EventRecorder, ObjectReference
from kubenode.kubeclient.timefmt import rfc3339
from kubenode.model.objects import Pod

_ALREADY_ASSIGNED = re.compile(r'is already assigned to node "([^"]*)"')


class NotLeading(RuntimeError):
    """This scheduler lost (or never had) leadership and must not write."""


def pod_reference(pod: Pod) -> ObjectReference:
    return ObjectReference(kind="Pod", name=pod.name, namespace=pod.namespace, uid=pod.uid)


def binding_body(pod: Pod, node: str) -> dict[str, Any]:
    """kube's DefaultBinder: v1.Binding naming the pod (with its uid) and the target Node."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def post_binding(client: KubeClient, pod: Pod, node: str) -> str | None:
    """POST the pod's Binding. None: bound now; a node name: it was already bound there (409
    "already assigned", which is not a failure). Any other error raises (e.g. being deleted)."""
    try:
        client.create(
            PODS, binding_body(pod, node), pod.namespace, name=pod.name, subresource="binding", decode=False
        )
    except Conflict as exc:
        earlier = already_assigned(exc)
        if earlier is None:
            raise
        return earlier
    return None


def already_assigned(error: Exception) -> str | None:
    """The node a 409 "is already assigned to node X" names; None for any other error."""
    match = _ALREADY_ASSIGNED.search(error.message) if isinstance(error, Conflict) else None
    return None if match is None else match.group(1)


def disruption_target_patch(pod: Pod, scheduler_name: str, now: float) -> dict[str, Any]:
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": rfc3339(now),
    }
    return {"metadata": {"uid": pod.uid}, "status": {"conditions": [condition]}}


class ApiWriter:
    """What the scheduler's writers share: the client, the event recorder, the leadership gate
    (`may_act`) and a wall clock for the times they write."""

    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        *,
        may_act: Callable[[], bool] = lambda: True,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.may_act = may_act
        self._wall = wall


class ApiBinder(ApiWriter):
    already_bound = 0  # 409s answered "already assigned" (for tests and logs)

    def _check(self) -> None:
        if not self.may_act():
            raise NotLeading("not the leader: not writing")

    def bind(self, pod: Pod, node: str) -> None:
        self._check()
        earlier = post_binding(self.client, pod, node)
        if earlier is not None:
            self.already_bound += 1
            if earlier != node:
                return  # someone else placed it; the informer's view wins
        self.scheduled(pod, node)

    def bind_async(self, pod: Pod, node: str, done: Callable[[Exception | None], None]) -> None:
        """`bind` without waiting: the POST goes out on the client's reactor and `done(None)` or
        `done(error)` is called on its thread once answered (the Scheduled event queued first)."""
        self._check()

        def answered(_: dict[str, Any] | None, error: KubeError | None) -> None:
            if error is not None:
                earlier = already_assigned(error)
                if earlier is None:
                    done(error)
                    return
                self.already_bound += 1
                if earlier != node:
                    done(None)  # someone else placed it; the informer's view wins
                    return
            self.scheduled(pod, node)
            done(None)

        path = PODS.path(pod.namespace, pod.name, "binding")
        self.client.request_async("POST", path, answered, body=binding_body(pod, node), decode=False)

    def scheduled(self, pod: Pod, node: str) -> None:
        """Record that the pod is bound (also after a binding extender bound it)."""
        self.recorder.event(
            pod_reference(pod), NORMAL, "Scheduled", f"Successfully assigned {pod.key} to {node}"
        )

    def evict(self, victim: Pod, preemptor: Pod, node: str) -> None:
        self._check()
        patch = disruption_target_patch(victim, preemptor.scheduler_name, self._wall())
        try:
            self.client.patch(PODS, victim.name, patch, victim.namespace, subresource="status")
            self.client.delete(
                PODS,
                victim.name,
                victim.namespace,
                grace_period_seconds=victim.termination_grace_period_seconds,
                uid=victim.uid or None,
            )
        except NotFound:
            return  # already gone: nothing left to evict
        self.recorder.event(
            pod_reference(victim),
            NORMAL,
            "Preempted",
            f"Preempted by pod {preemptor.uid or preemptor.key} on node {node}",
        )
