"""The garbage collector (kube's pkg/controller/garbagecollector): ownerReferences, propagation, finalizers.

Flow:
1. Informers on every kind in `resources.GC_RESOURCES` feed an index of owner uid -> dependents, and
   queue each object that changes (a dependent to check its owners, an owner being deleted to act on
   its finalizers), and the dependents of an owner that changes or goes.
2. `sync` of an object being deleted (the API server added the finalizer the DELETE's
   propagationPolicy asked for, apiserver/handlers/deletes.py):
   - `orphan`: remove this owner from each dependent's ownerReferences, then the finalizer;
   - `foregroundDeletion`: delete each dependent (in the foreground too); once no dependent with
     `blockOwnerDeletion` is left, remove the finalizer and the API server lets the owner go.
3. `sync` of any other object with ownerReferences (kube's attemptToDeleteItem): owners are looked up
   in the informers, else with a live GET (an owner is gone when it is not found or its uid differs).
   With an owner still there, references to gone owners (and to owners deleting in the foreground)
   are removed; with none, the object is deleted: in the foreground when an owner waits for it,
   else with the policy its own finalizers name (Background by default).
Writes carry uid (deletes) or resourceVersion (finalizer patches) preconditions; a conflict or a
failure requeues the object.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from controllers.framework import Controller, Obj, SharedInformers, meta
from controllers.resources import GC_RESOURCES, by_kind
from kubenode.kubeclient import KubeClient, NotFound
from kubenode.kubeclient.client import Resource
from kubenode.kubeclient.informer import Informer

log = logging.getLogger(__name__)

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _resource_key(resource: Resource) -> str:
    return f"{resource.group}/{resource.plural}"


class GarbageCollector(Controller):
    name = "garbage-collector"

    def __init__(self, client: KubeClient, informers: SharedInformers, may_act: Callable[[], bool]) -> None:
        super().__init__(client, may_act)
        self.informers: dict[str, tuple[Resource, Informer[Obj]]] = {}
        self._dependents: dict[str, set[str]] = {}  # owner uid -> queue keys of its dependents
        self._owners_of: dict[str, set[str]] = {}  # queue key -> owner uids (to unindex)
        self._key_of_uid: dict[str, str] = {}  # uid -> queue key of every object the informers hold
        self._index_lock = threading.Lock()
        for resource in list(GC_RESOURCES):
            rkey = _resource_key(resource)
            informer = informers.on(
                resource,
                add=lambda obj, r=resource: self._changed(r, obj),
                update=lambda _old, new, r=resource: self._changed(r, new),
                delete=lambda obj, r=resource: self._gone(r, obj),
            )
            self.informers[rkey] = (resource, informer)

    # ----- the index ---------------------------------------------------------------------------

    @staticmethod
    def _key(resource: Resource, obj: Obj) -> str:
        m = meta(obj)
        return f"{_resource_key(resource)}|{m.get('namespace') or ''}/{m.get('name')}"

    def _index(self, key: str, obj: Obj | None, uid: str) -> None:
        uids = {str(r.get("uid")) for r in (meta(obj).get("ownerReferences") or [])} if obj else set()
        with self._index_lock:
            if obj is None:
                self._key_of_uid.pop(uid, None)
            else:
                self._key_of_uid[uid] = key
            for uid in self._owners_of.pop(key, set()) - uids:
                self._dependents.get(uid, set()).discard(key)
            for uid in uids:
                self._dependents.setdefault(uid, set()).add(key)
            if uids:
                self._owners_of[key] = uids

    def dependents(self, uid: str) -> list[str]:
        with self._index_lock:
            return sorted(self._dependents.get(uid, ()))

    def _changed(self, resource: Resource, obj: Obj) -> None:
        key = self._key(resource, obj)
        m = meta(obj)
        self._index(key, obj, str(m.get("uid")))
        if m.get("ownerReferences") or m.get("deletionTimestamp"):
            self.enqueue_key(key)
        if m.get("deletionTimestamp"):
            for dependent in self.dependents(str(m.get("uid"))):
                self.enqueue_key(dependent)

    def _gone(self, resource: Resource, obj: Obj) -> None:
        key = self._key(resource, obj)
        uid = str(meta(obj).get("uid"))
        self._index(key, None, uid)
        for dependent in self.dependents(uid):
            self.enqueue_key(dependent)
        for owner_uid in {str(r.get("uid")) for r in meta(obj).get("ownerReferences") or []}:
            self._enqueue_owner(owner_uid)  # a foreground owner may be waiting for this one

    def _enqueue_owner(self, uid: str) -> None:
        with self._index_lock:
            key = self._key_of_uid.get(uid)
        if key is not None:
            self.enqueue_key(key)  # its sync acts only if it is being deleted

    # ----- one object --------------------------------------------------------------------------

    def _lookup(self, key: str) -> tuple[Resource, Obj] | None:
        rkey, _, where = key.partition("|")
        resource, informer = self.informers[rkey]
        obj = informer.get(where.lstrip("/") if not resource.namespaced else where)
        return (resource, obj) if obj is not None else None

    def sync(self, key: str) -> None:
        found = self._lookup(key)
        if found is None:
            return
        resource, obj = found
        finalizers = meta(obj).get("finalizers") or []
        if meta(obj).get("deletionTimestamp"):
            if ORPHAN in finalizers:
                self._orphan_dependents(obj)
                self._remove_finalizer(resource, obj, ORPHAN)
            elif FOREGROUND in finalizers:
                self._delete_dependents_first(resource, obj)
            return
        self._check_owners(resource, obj)

    def _owner_state(self, namespace: str, ref: Mapping[str, Any]) -> Obj | None:
        """The owner a reference names, from the informers or a live GET; None when it is gone."""
        resource = by_kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        if resource is None:
            return {"metadata": {"uid": ref.get("uid")}}  # a kind not followed: assume it is there
        where = f"{namespace}/{ref.get('name')}" if resource.namespaced else str(ref.get("name"))
        entry = self.informers.get(_resource_key(resource))
        owner = entry[1].get(where) if entry else None
        if owner is None:
            try:
                owner = self.client.get(
                    resource, str(ref.get("name")), namespace if resource.namespaced else None
                )
            except NotFound:
                return None
        return owner if meta(owner).get("uid") == ref.get("uid") else None

    def _check_owners(self, resource: Resource, obj: Obj) -> None:
        refs = meta(obj).get("ownerReferences") or []
        if not refs:
            return
        namespace = str(meta(obj).get("namespace") or "")
        solid, gone, waiting = [], [], []
        for ref in refs:
            owner = self._owner_state(namespace, ref)
            if owner is None:
                gone.append(ref)
            elif meta(owner).get("deletionTimestamp") and FOREGROUND in (meta(owner).get("finalizers") or []):
                waiting.append(ref)
            else:
                solid.append(ref)
        if solid:
            if gone or waiting:
                patch = [{"$patch": "delete", "uid": r.get("uid")} for r in gone + waiting]
                self.client.patch(resource, str(meta(obj)["name"]), {"metadata": {"ownerReferences": patch,
                                  "uid": meta(obj).get("uid")}}, namespace or None)  # fmt: skip
            return
        finalizers = meta(obj).get("finalizers") or []
        if waiting:
            policy = "Foreground"
        elif ORPHAN in finalizers:
            policy = "Orphan"
        elif FOREGROUND in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        log.info(
            "garbage collector: deleting %s %s/%s (%s)",
            resource.kind,
            namespace,
            meta(obj).get("name"),
            policy,
        )
        with contextlib.suppress(NotFound):
            name = str(meta(obj)["name"])
            self.client.delete(
                resource, name, namespace or None, uid=meta(obj).get("uid"), propagation_policy=policy
            )

    def _dependent_objects(self, owner: Obj) -> list[tuple[Resource, Obj]]:
        found = []
        for key in self.dependents(str(meta(owner).get("uid"))):
            entry = self._lookup(key)
            if entry is not None:
                found.append(entry)
        return found

    def _orphan_dependents(self, owner: Obj) -> None:
        uid = meta(owner).get("uid")
        for resource, dependent in self._dependent_objects(owner):
            patch = {
                "metadata": {
                    "ownerReferences": [{"$patch": "delete", "uid": uid}],
                    "uid": meta(dependent).get("uid"),
                }
            }
            with contextlib.suppress(NotFound):
                self.client.patch(
                    resource, str(meta(dependent)["name"]), patch, meta(dependent).get("namespace")
                )

    def _delete_dependents_first(self, resource: Resource, owner: Obj) -> None:
        blocking = 0
        for dep_resource, dependent in self._dependent_objects(owner):
            ref = next(
                r
                for r in meta(dependent).get("ownerReferences") or []
                if r.get("uid") == meta(owner).get("uid")
            )
            if ref.get("blockOwnerDeletion"):
                blocking += 1
            if not meta(dependent).get("deletionTimestamp"):
                self.enqueue_key(self._key(dep_resource, dependent))  # it deletes itself in the foreground
        if blocking == 0:
            self._remove_finalizer(resource, owner, FOREGROUND)

    def _remove_finalizer(self, resource: Resource, obj: Obj, finalizer: str) -> None:
        m = meta(obj)
        kept = [f for f in m.get("finalizers") or [] if f != finalizer]
        patch = {"metadata": {"finalizers": kept or None, "resourceVersion": m.get("resourceVersion")}}
        with contextlib.suppress(NotFound):
            self.client.patch(resource, str(m["name"]), patch, m.get("namespace"), patch_type="merge")
