"""The node lifecycle controller's NoSchedule tainting pass (kube's TaintNodesByCondition).

Flow, as kube-controller-manager's doNoScheduleTaintingPass:
1. An informer on Nodes queues the name of every Node added or updated (and each one once at sync).
2. A worker takes a name from the queue, reads the Node from the informer's store and computes the
   NoSchedule taints its conditions call for (`condition_taints`: Ready False -> not-ready, Ready
   Unknown -> unreachable, MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True -> the
   matching pressure taint; spec.unschedulable -> unschedulable).
3. It compares them with the NoSchedule taints this controller owns on the Node (those keys only: a
   user's taints, and every NoExecute taint, are left alone) and, if they differ, PATCHes spec.taints:
   the whole new list (taints have no merge key) with metadata.resourceVersion as the precondition, as
   kube's PatchNodeTaints does. Added taints carry timeAdded. A 409 re-reads the Node (GET) and tries
   again; a Node gone meanwhile is forgotten.
Failures other than a conflict put the name back on the queue after a capped backoff, so no change
is lost while the API server is away.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubenode.kubeclient import NODES, Conflict, KubeClient, KubeError, NotFound
from kubenode.kubeclient.informer import Backoff, Informer
from kubenode.kubeclient.timefmt import rfc3339

log = logging.getLogger(__name__)

NO_SCHEDULE = "NoSchedule"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
# kube's nodeConditionToTaintKeyStatusMap: {condition type: {status: taint key}}.
CONDITION_TAINTS: Mapping[str, Mapping[str, str]] = {
    "Ready": {"False": NOT_READY, "Unknown": UNREACHABLE},
    "MemoryPressure": {"True": "node.kubernetes.io/memory-pressure"},
    "DiskPressure": {"True": "node.kubernetes.io/disk-pressure"},
    "NetworkUnavailable": {"True": "node.kubernetes.io/network-unavailable"},
    "PIDPressure": {"True": "node.kubernetes.io/pid-pressure"},
}
# The NoSchedule taint keys this controller owns (kube's taintKeyToNodeConditionMap plus unschedulable).
OWNED_KEYS = frozenset({key for by_status in CONDITION_TAINTS.values() for key in by_status.values()}) | {
    UNSCHEDULABLE
}
CONFLICT_RETRIES = 5  # client-go's retry.DefaultBackoff steps for RetryOnConflict


def condition_taints(node: Mapping[str, Any]) -> list[str]:
    """The keys of the NoSchedule taints that the Node's conditions and spec.unschedulable call for."""
    keys: list[str] = []
    for condition in (node.get("status") or {}).get("conditions") or []:
        key = CONDITION_TAINTS.get(str(condition.get("type")), {}).get(str(condition.get("status")))
        if key is not None and key not in keys:
            keys.append(key)
    if (node.get("spec") or {}).get("unschedulable"):
        keys.append(UNSCHEDULABLE)
    return keys


def _owned(taint: Mapping[str, Any]) -> bool:
    return taint.get("effect") == NO_SCHEDULE and taint.get("key") in OWNED_KEYS


def desired_taints(node: Mapping[str, Any], now: str) -> list[dict[str, Any]] | None:
    """The Node's new spec.taints, or None if it already has exactly the owned taints it should.
    Taints this controller does not own keep their place; the added ones go last, stamped `now`."""
    current = [dict(t) for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, Mapping)]
    wanted = condition_taints(node)
    have = {str(t.get("key")) for t in current if _owned(t)}
    if have == set(wanted):
        return None
    kept = [t for t in current if not _owned(t) or t.get("key") in wanted]
    added = [{"key": key, "effect": NO_SCHEDULE, "timeAdded": now} for key in wanted if key not in have]
    return kept + added


def taints_patch(node: Mapping[str, Any], taints: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """kube's PatchNodeTaints: the whole list, with the resourceVersion read as the precondition."""
    version = str((node.get("metadata") or {}).get("resourceVersion") or "")
    return {"metadata": {"resourceVersion": version}, "spec": {"taints": list(taints)}}


class NodeLifecycleController:
    def __init__(
        self,
        client: KubeClient,
        *,
        may_act: Callable[[], bool] = lambda: True,
        wall: Callable[[], float] = time.time,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 10.0,
    ) -> None:
        self.client = client
        self._may_act = may_act
        self._wall = wall
        self._backoff = Backoff(backoff_initial_s, backoff_max_s)
        self._queue: list[str] = []
        self._queued: set[str] = set()
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.patches = 0  # taint PATCHes that succeeded (tests, logs)
        self.nodes: Informer[dict[str, Any]] = Informer(
            client,
            NODES,
            on_add=lambda node: self.enqueue(node),
            on_update=lambda old, new: self.enqueue(new),
            name="controller-nodes",
        )

    # ----- the queue ---------------------------------------------------------------------------

    def enqueue(self, node: Mapping[str, Any]) -> None:
        name = str((node.get("metadata") or {}).get("name") or "")
        if not name:
            return
        with self._ready:
            if name not in self._queued:
                self._queued.add(name)
                self._queue.append(name)
                self._ready.notify()

    def _next(self) -> str | None:
        with self._ready:
            while not self._queue and not self._stop.is_set():
                self._ready.wait(1.0)
            if self._stop.is_set():
                return None
            name = self._queue.pop(0)
            self._queued.discard(name)
            return name

    # ----- one node ----------------------------------------------------------------------------

    def sync(self, name: str) -> bool:
        """Bring one Node's owned taints in line with its conditions; True if a PATCH was sent."""
        node = self.nodes.get(name)
        if node is None:
            return False
        for _ in range(CONFLICT_RETRIES):
            taints = desired_taints(node, rfc3339(self._wall()))
            if taints is None or not self._may_act():
                return False
            try:
                self.client.patch(NODES, name, taints_patch(node, taints))
            except NotFound:
                return False
            except Conflict:
                try:
                    node = self.client.get(NODES, name)  # the cache was behind: read it fresh
                except NotFound:
                    return False
                continue
            self.patches += 1
            shown = ", ".join(f"{t['key']}:{t['effect']}" for t in taints) or "none"
            log.info("node %s: taints now %s", name, shown)
            return True
        raise KubeError(f"node {name}: taints still conflicting after {CONFLICT_RETRIES} tries")

    def _work(self) -> None:
        while (name := self._next()) is not None:
            try:
                self.sync(name)
                self._backoff.reset()
            except KubeError as exc:
                log.warning("node lifecycle: %s; retrying", exc)
                self._retry_later(name)
            except Exception:  # a bug must not end the controller
                log.exception("node lifecycle: node %s", name)
                self._retry_later(name)

    def _retry_later(self, name: str) -> None:
        if not self._stop.wait(self._backoff.next()):
            node = self.nodes.get(name)
            if node is not None:
                self.enqueue(node)

    # ----- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.nodes.start()
        self._thread = threading.Thread(target=self._work, name="node-lifecycle", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._ready:
            self._ready.notify_all()
        self.nodes.stop()
        if self._thread is not None:
            self._thread.join(10)
