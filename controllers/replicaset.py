"""The ReplicaSet controller (kube's pkg/controller/replicaset), on the shared informers.

Flow of `sync(namespace/name)`:
1. Claim pods (pods.claim): those whose controllerRef is this ReplicaSet and still match its selector;
   orphans that match are adopted (an ownerReferences patch), owned pods that stopped matching are
   released. Terminal and deleting pods do not count.
2. If the expectations of this key are met (every create and delete asked for has been seen by the
   pod informer), make the count right: create the missing pods from the template (at most
   BURST_REPLICAS a sync, in kube's slow-start batches 1, 2, 4, ... that stop at the first failure),
   or delete the surplus (unscheduled, pending, not-ready and newest pods first). Expectations are set
   before the writes, so an informer that lags never makes a second round of creates; a restarted
   controller starts from the listed pods, so it never makes more than `replicas` either.
3. Write status (replicas, fullyLabeledReplicas, readyReplicas, availableReplicas,
   observedGeneration) with PUT /status when it changed; a pod that becomes available after
   minReadySeconds requeues the key then.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from controllers.framework import Controller, Obj, SharedInformers, key_of, meta
from controllers.pods import (
    Expectations,
    adopt_patch,
    claim,
    controller_ref,
    deletion_rank,
    is_active,
    is_available,
    is_ready,
    pod_from_template,
    release_patch,
)
from controllers.resources import PODS, REPLICASETS
from kubenode.kubeclient import KubeClient, NotFound
from kubenode.kubeclient.client import Resource
from kubenode.labelselector import matches

log = logging.getLogger(__name__)

BURST_REPLICAS = 500  # kube's burstReplicas: creates or deletes per sync


class PodOwnerController(Controller):
    """What the ReplicaSet and Job controllers share: pods to owners, expectations, create and delete."""

    resource: Resource = REPLICASETS

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        may_act: Callable[[], bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(client, may_act, clock)
        self.expectations = Expectations()
        self.owners = informers.on(self.resource, add=self.enqueue, update=lambda _o, n: self.enqueue(n),
                                   delete=self._owner_deleted)  # fmt: skip
        self.pods = informers.on(
            PODS, add=self._pod_added, update=self._pod_updated, delete=self._pod_deleted
        )

    def enqueue(self, obj: Obj) -> None:
        self.enqueue_key(key_of(obj))

    def _owner_deleted(self, obj: Obj) -> None:
        self.expectations.forget(key_of(obj))
        self.enqueue(obj)

    def _owner_key(self, pod: Obj) -> str | None:
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != self.resource.kind:
            return None
        key = f"{meta(pod).get('namespace')}/{ref.get('name')}"
        owner = self.owners.get(key)
        return key if owner is not None and meta(owner).get("uid") == ref.get("uid") else None

    def _orphan_owners(self, pod: Obj) -> None:
        """A pod without a controller: every owner in its namespace whose selector matches may adopt it."""
        namespace = meta(pod).get("namespace")
        labels = meta(pod).get("labels") or {}
        for owner in self.owners.items():
            if meta(owner).get("namespace") == namespace and matches(owner_selector(owner), labels):
                self.enqueue(owner)

    def _pod_added(self, pod: Obj) -> None:
        key = self._owner_key(pod)
        if key is not None:
            self.expectations.created(key)
            self.enqueue_key(key)
        elif controller_ref(pod) is None and not meta(pod).get("deletionTimestamp"):
            self._orphan_owners(pod)

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        old_key, new_key = self._owner_key(old), self._owner_key(new)
        if old_key and old_key != new_key:
            self.enqueue_key(old_key)
        if new_key:
            self.enqueue_key(new_key)
            if meta(new).get("deletionTimestamp") and not meta(old).get("deletionTimestamp"):
                self.expectations.deleted(new_key)
        elif controller_ref(new) is None:
            self._orphan_owners(new)

    def _pod_deleted(self, pod: Obj) -> None:
        key = self._owner_key(pod)
        if key is not None:
            if not meta(pod).get("deletionTimestamp"):
                self.expectations.deleted(key)
            self.enqueue_key(key)

    def claimed_pods(self, owner: Obj) -> list[Obj]:
        """The owner's pods (active or not), after adopting and releasing as kube's ClaimPods."""
        namespace = meta(owner).get("namespace")
        pods = [p for p in self.pods.items() if meta(p).get("namespace") == namespace]
        owned, adopt, release = claim(owner, owner_selector(owner), pods)
        for pod in adopt:
            with contextlib.suppress(NotFound):
                owned.append(self.client.patch(PODS, meta(pod)["name"], adopt_patch(owner, pod), namespace))
        for pod in release:
            with contextlib.suppress(NotFound):
                self.client.patch(PODS, meta(pod)["name"], release_patch(owner, pod), namespace)
        return owned

    def create_pods(self, key: str, owner: Obj, count: int, template: Mapping[str, Any]) -> int:
        """Create `count` pods in slow-start batches; returns how many were created."""
        count = min(count, BURST_REPLICAS)
        self.expectations.expect(key, count, 0)
        created, batch = 0, 1
        body = pod_from_template(owner, template)
        namespace = meta(owner).get("namespace")
        while created < count:
            size = min(batch, count - created)
            for _ in range(size):
                try:
                    made = self.client.create(PODS, body, namespace)
                except Exception:
                    # What was not created will not be observed: lower the expectations by it.
                    for _ in range(count - created):
                        self.expectations.created(key)
                    raise
                created += 1
                self.event(owner, "SuccessfulCreate", f"Created pod: {meta(made).get('name')}")
            batch *= 2
        return created

    def delete_pods(self, key: str, pods: list[Obj]) -> None:
        self.expectations.expect(key, 0, len(pods))
        for i, pod in enumerate(pods):
            try:
                self.client.delete(
                    PODS, meta(pod)["name"], meta(pod).get("namespace"), uid=meta(pod).get("uid")
                )
            except NotFound:
                self.expectations.deleted(key)
                continue
            except Exception:
                for _ in pods[i:]:
                    self.expectations.deleted(key)
                raise
            owner = self.owners.get(key)
            if owner is not None:
                self.event(owner, "SuccessfulDelete", f"Deleted pod: {meta(pod)['name']}")

    def write_status(self, owner: Obj, status: dict[str, Any]) -> None:
        """A merge patch of the status fields that changed: one worker syncs a key at a time, so nothing
        else writes them, and a write to the object's metadata meanwhile is no conflict."""
        write_status(self.client, self.resource, owner, status)


def write_status(client: KubeClient, resource: Resource, owner: Obj, status: Mapping[str, Any]) -> None:
    current = owner.get("status") or {}
    changed = {k: v for k, v in status.items() if current.get(k) != v}
    if changed:
        name, namespace = meta(owner)["name"], meta(owner).get("namespace")
        client.patch(resource, name, {"status": changed}, namespace, subresource="status", patch_type="merge")


def owner_selector(owner: Obj) -> Mapping[str, Any] | None:
    selector: Mapping[str, Any] | None = (owner.get("spec") or {}).get("selector")
    return selector


class ReplicaSetController(PodOwnerController):
    name = "replicaset"
    resource = REPLICASETS

    def sync(self, key: str) -> None:
        rs = self.owners.get(key)
        if rs is None:
            self.expectations.forget(key)
            return
        spec = rs.get("spec") or {}
        pods = self.claimed_pods(rs)
        active = [p for p in pods if is_active(p)]
        if self.expectations.satisfied(key) and not meta(rs).get("deletionTimestamp"):
            diff = len(active) - int(spec.get("replicas") or 0)
            if diff < 0:
                self.create_pods(key, rs, -diff, spec.get("template") or {})
            elif diff > 0:
                doomed = sorted(active, key=deletion_rank)[: min(diff, BURST_REPLICAS)]
                self.delete_pods(key, doomed)
        self._sync_status(rs, active)

    def _sync_status(self, rs: Obj, active: list[Obj]) -> None:
        spec = rs.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock()
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        labelled = [
            p
            for p in active
            if all((meta(p).get("labels") or {}).get(k) == v for k, v in template_labels.items())
        ]
        ready = [p for p in active if is_ready(p)]
        available = [p for p in ready if is_available(p, min_ready, now)]
        if min_ready and len(available) < len(ready):
            self.queue.add_after(key_of(rs), float(min_ready))
        self.write_status(
            rs,
            {
                "replicas": len(active),
                "fullyLabeledReplicas": len(labelled),
                "readyReplicas": len(ready),
                "availableReplicas": len(available),
                "observedGeneration": meta(rs).get("generation", 0),
            },
        )


__all__ = ["BURST_REPLICAS", "PodOwnerController", "ReplicaSetController", "owner_selector", "write_status"]
