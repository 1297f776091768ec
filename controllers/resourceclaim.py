"""The ResourceClaim controller (kube-controller-manager's pkg/controller/resourceclaim).

Flow:
1. A pod that appears or changes is queued as `pod:<ns>/<name>`. Its `sync` makes, for every
   `spec.resourceClaims[]` entry naming a `resourceClaimTemplateName` and not yet named in
   `status.resourceClaimStatuses`, a ResourceClaim from the template: generateName
   `<pod>-<entry>-` (both cut in proportion to their length when together they pass 57, as kube does), the
   template's labels and annotations plus `resource.kubernetes.io/pod-claim-name: <entry>`, and an
   ownerReference to the pod (controller, blockOwnerDeletion). A claim the pod already owns for that
   entry (a status write that failed before) is reused instead of making a second one. The names go
   into the pod's `status.resourceClaimStatuses` with a strategic merge patch carrying the pod's uid.
   A claim named there that was deleted by hand is made again. Pods being deleted get no claims; a
   missing template is retried (with backoff) and reported (`FailedResourceClaimCreation`). For a pod
   already on a node (bound directly), an allocated claim not yet reserved for it gets the pod in
   `reservedFor` (kube's reserveForPod).
2. A claim that appears or changes, and every claim of a pod that finishes or goes, is queued as
   `claim:<ns>/<name>`. Its `sync` drops the `status.reservedFor` entries of pods that are gone
   (asked for when the informer lacks them), replaced (another uid) or done (kube's isPodDone),
   writing the status with the resourceVersion it read (a conflict requeues). The write that drops
   the last consumer also deallocates the claim (kube does so for claims its scheduler protected
   with `resource.kubernetes.io/delete-protection`, which scheduler/dra/live.py adds as kube's does when
   it allocates; an allocated claim without it is treated alike), and that finalizer is removed once the
   allocation is gone: a claim deleted while pods use it stays (its devices taken) until the last of
   them is gone, then is deallocated and goes. Then a claim made for a pod (its controller reference)
   whose pod is done or replaced and that nobody reserves is deleted (uid precondition).
The garbage collector follows the claims' ownerReferences as well (`resources.register`), so a claim
whose pod was deleted while this controller was down still goes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from controllers.framework import Controller, Obj, SharedInformers, meta, split_key
from controllers.resources import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, register
from kubenode.kubeclient import KubeClient, KubeError, NotFound

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
MAX_BASE = 57  # 63 less the hyphen and kube's 5 random characters
MAX_RESERVED = 256  # kube's ResourceClaimReservedForMaxSize
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"  # kube's resourceapi.Finalizer


def generate_name(pod_name: str, entry: str) -> str:
    """kube's generateName for a claim from a template: `<pod>-<entry>-`, or, when that passes 57
    characters, both names cut in proportion to their length (and no trailing hyphen)."""
    base = f"{pod_name}-{entry}-"
    if len(base) <= MAX_BASE:
        return base
    return (
        f"{pod_name[: len(pod_name) * MAX_BASE // len(base)]}-{entry[: len(entry) * MAX_BASE // len(base)]}"
    )


def pod_done(pod: Mapping[str, Any]) -> bool:
    """kube's isPodDone: none of its containers runs or ever will (a terminal phase, or deleted before
    it was scheduled)."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) and not (pod.get("spec") or {}).get(
        "nodeName"
    )


def owner_pod(claim: Mapping[str, Any]) -> tuple[str, str]:
    """The name and uid of the pod a claim was made for (its controller reference), or ("", "")."""
    for ref in meta(dict(claim)).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
            return str(ref.get("name") or ""), str(ref.get("uid") or "")
    return "", ""


class ResourceClaimController(Controller):
    name = "resource-claim"
    workers = 2

    def __init__(self, client: KubeClient, informers: SharedInformers, may_act: Callable[[], bool]) -> None:
        super().__init__(client, may_act)
        register(RESOURCE_CLAIMS)  # the garbage collector deletes a claim whose pod is gone
        self.pods = informers.on(
            PODS, add=self._pod_changed, update=lambda _o, n: self._pod_changed(n), delete=self._pod_gone
        )
        self.claims = informers.on(
            RESOURCE_CLAIMS, add=self._claim_changed, update=lambda _o, n: self._claim_changed(n)
        )
        self.templates = informers.on(RESOURCE_CLAIM_TEMPLATES)

    # ----- events ------------------------------------------------------------------------------

    def _pod_changed(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("resourceClaims"):
            m = meta(pod)
            self.enqueue_key(f"pod:{m.get('namespace')}/{m.get('name')}")
            if pod_done(pod) or m.get("deletionTimestamp"):
                self._pod_gone(pod)

    def _pod_gone(self, pod: Obj) -> None:
        """Queue every claim that names the pod as owner or consumer (only a pod with claims can be one)."""
        if not (pod.get("spec") or {}).get("resourceClaims"):
            return
        m = meta(pod)
        uid, namespace = m.get("uid"), m.get("namespace")
        for claim in self.claims.items():
            cm = meta(claim)
            if cm.get("namespace") != namespace:
                continue
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if owner_pod(claim)[1] == uid or any(r.get("uid") == uid for r in reserved):
                self.enqueue_key(f"claim:{namespace}/{cm.get('name')}")

    def _claim_changed(self, claim: Obj) -> None:
        m = meta(claim)
        self.enqueue_key(f"claim:{m.get('namespace')}/{m.get('name')}")

    def sync(self, key: str) -> None:
        what, _, rest = key.partition(":")
        if what == "pod":
            self._sync_pod(rest)
        else:
            self._sync_claim(rest)

    # ----- pods: claims from templates -----------------------------------------------------------

    def _sync_pod(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or meta(pod).get("deletionTimestamp"):
            return
        namespace, pod_name = split_key(key)
        named = {
            str(s.get("name")): str(s.get("resourceClaimName") or "")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        statuses = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template = entry.get("resourceClaimTemplateName")
            if not template or self._still_there(pod, named.get(str(entry.get("name")), "")):
                continue
            try:
                claim = self._owned_claim(pod, str(entry["name"])) or self._create_claim(
                    pod, entry, str(template)
                )
            except KubeError as exc:
                message = f"PodResourceClaim {entry.get('name')}: {exc}"
                self.event(pod, "FailedResourceClaimCreation", message, kind="Warning")
                raise
            statuses.append({"name": str(entry["name"]), "resourceClaimName": str(meta(claim)["name"])})
        if statuses:
            patch = {"metadata": {"uid": meta(pod)["uid"]}, "status": {"resourceClaimStatuses": statuses}}
            self.client.patch(PODS, pod_name, patch, namespace, subresource="status", decode=False)
        if (pod.get("spec") or {}).get("nodeName"):
            named.update((s["name"], s["resourceClaimName"]) for s in statuses)
            self._reserve_for_bound_pod(pod, named)

    def _still_there(self, pod: Obj, claim_name: str) -> bool:
        """Whether the claim the pod's status names for an entry exists and is the pod's (a live GET
        when the informer lacks it: it may not have seen the create yet)."""
        if not claim_name:
            return False
        namespace = str(meta(pod).get("namespace"))
        claim = self.claims.get(f"{namespace}/{claim_name}")
        if claim is None:
            try:
                claim = self.client.get(RESOURCE_CLAIMS, claim_name, namespace)
            except NotFound:
                return False
        return owner_pod(claim)[1] == meta(pod).get("uid")

    def _reserve_for_bound_pod(self, pod: Obj, template_claims: Mapping[str, str]) -> None:
        """kube's reserveForPod: a pod put on a node without the scheduler uses its allocated claims."""
        pm = meta(pod)
        namespace = str(pm.get("namespace"))
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            name = entry.get("resourceClaimName") or template_claims.get(str(entry.get("name")))
            claim = self.claims.get(f"{namespace}/{name}") if name else None
            if claim is None:
                continue
            status = claim.get("status") or {}
            reserved = status.get("reservedFor") or []
            if not status.get("allocation") or len(reserved) >= MAX_RESERVED:
                continue
            if any(r.get("uid") == pm.get("uid") for r in reserved):
                continue
            consumer = {"resource": "pods", "name": pm.get("name"), "uid": pm.get("uid")}
            body = {**claim, "status": {**status, "reservedFor": [*reserved, consumer]}}
            self.client.update(RESOURCE_CLAIMS, body, subresource="status")

    def _owned_claim(self, pod: Obj, entry: str) -> Obj | None:
        """A claim made for this entry of this pod before its status was written."""
        uid, namespace = meta(pod).get("uid"), meta(pod).get("namespace")
        for claim in self.claims.items():
            cm = meta(claim)
            if (
                cm.get("namespace") == namespace
                and owner_pod(claim)[1] == uid
                and (cm.get("annotations") or {}).get(POD_CLAIM_NAME) == entry
            ):
                return claim
        return None

    def _create_claim(self, pod: Obj, entry: Mapping[str, Any], template_name: str) -> Obj:
        pm = meta(pod)
        namespace = str(pm.get("namespace"))
        template = self.templates.get(f"{namespace}/{template_name}")
        if template is None:  # kube: the pod waits; the template may come later
            template = self.client.get(RESOURCE_CLAIM_TEMPLATES, template_name, namespace)
        spec = template.get("spec") or {}
        template_meta = spec.get("metadata") or {}
        body = {
            "apiVersion": RESOURCE_CLAIMS.api_version,
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": generate_name(str(pm.get("name")), str(entry["name"])),
                "namespace": namespace,
                "labels": dict(template_meta.get("labels") or {}),
                "annotations": {**(template_meta.get("annotations") or {}), POD_CLAIM_NAME: entry["name"]},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pm.get("name"),
                        "uid": pm.get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec.get("spec") or {},
        }
        claim = self.client.create(RESOURCE_CLAIMS, body, namespace)
        self.event(pod, "ResourceClaimCreated", f"Created ResourceClaim {meta(claim).get('name')}")
        return claim

    # ----- claims: consumers that are gone, claims nobody needs -----------------------------------

    def _consumer_gone(self, namespace: str, ref: Mapping[str, Any]) -> bool:
        """A `reservedFor` pod that is gone, replaced (another uid) or done. A pod the informer lacks is
        asked for (kube: it may be one the scheduler saw first; dropping it would be wrong)."""
        if ref.get("resource") != "pods" or ref.get("apiGroup"):
            return False  # other consumers are left to whoever reserved them
        pod = self.pods.get(f"{namespace}/{ref.get('name')}")
        if pod is None:
            try:
                pod = self.client.get(PODS, str(ref.get("name")), namespace)
            except NotFound:
                return True
        return meta(pod).get("uid") != ref.get("uid") or pod_done(pod)

    def _sync_claim(self, key: str) -> None:
        claim = self.claims.get(key)
        if claim is None:
            return
        namespace, name = split_key(key)
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        valid = [r for r in reserved if not self._consumer_gone(namespace, r)]
        deleting = bool(meta(claim).get("deletionTimestamp"))
        if len(valid) < len(reserved) or (deleting and not valid and status.get("allocation")):
            # A PUT with the resourceVersion read: if the scheduler reserved it meanwhile, 409 and again.
            # The last consumer gone deallocates the claim, so its devices are free for others.
            kept = {k: v for k, v in status.items() if k not in ("reservedFor", "allocation")}
            if valid:
                kept.update(reservedFor=valid, allocation=status.get("allocation"))
            claim = self.client.update(RESOURCE_CLAIMS, {**claim, "status": kept}, subresource="status")
        finalizers = meta(claim).get("finalizers") or []
        if DELETE_PROTECTION in finalizers and not (claim.get("status") or {}).get("allocation"):
            others = [f for f in finalizers if f != DELETE_PROTECTION]
            claim = self.client.update(
                RESOURCE_CLAIMS, {**claim, "metadata": {**meta(claim), "finalizers": others}}
            )
        owner, owner_uid = owner_pod(claim)
        if not owner_uid or valid or deleting:
            return
        pod = self.pods.get(f"{namespace}/{owner}")
        if pod is None:
            return  # kube: not known yet, or gone: the garbage collector deletes the claim then
        if meta(pod).get("uid") == owner_uid and not pod_done(pod):
            return
        with contextlib.suppress(NotFound):
            self.client.delete(RESOURCE_CLAIMS, name, namespace, uid=str(meta(claim).get("uid")))
