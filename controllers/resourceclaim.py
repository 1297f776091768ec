"""The ResourceClaim controller (kube-controller-manager's pkg/controller/resourceclaim).

Flow:
1. A pod that appears or changes is queued as `pod:<ns>/<name>`. Its `sync` makes, for every
   `spec.resourceClaims[]` entry naming a `resourceClaimTemplateName` and not yet named in
   `status.resourceClaimStatuses`, a ResourceClaim from the template: generateName
   `<pod>-<entry>-` (both cut to 28 characters when together they pass 57, as kube does), the
   template's labels and annotations plus `resource.kubernetes.io/pod-claim-name: <entry>`, and an
   ownerReference to the pod (controller, blockOwnerDeletion). A claim the pod already owns for that
   entry (a status write that failed before) is reused instead of making a second one. The names go
   into the pod's `status.resourceClaimStatuses` with a strategic merge patch carrying the pod's uid.
   Pods being deleted or finished get no claims; a missing template is retried (with backoff).
2. A claim that appears or changes, and every claim of a pod that finishes or goes, is queued as
   `claim:<ns>/<name>`. Its `sync` drops the `status.reservedFor` entries of pods that are gone (not
   in the informer, or another uid) or finished, writing the status with the resourceVersion it read
   (a conflict requeues); then a claim made for a pod (its controller reference) whose pod is gone or
   finished and that nobody reserves any more is deleted (uid precondition).
The garbage collector follows the claims' ownerReferences as well (`resources.register`), so a claim
whose pod was deleted while this controller was down still goes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from controllers.framework import Controller, Obj, SharedInformers, meta, split_key
from controllers.resources import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, register
from kubenode.kubeclient import KubeClient, NotFound

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
MAX_BASE = 57  # 63 less the hyphen and kube's 5 random characters
PART = 28


def generate_name(pod_name: str, entry: str) -> str:
    """kube's generateName for a claim from a template: both parts cut when together too long."""
    base = f"{pod_name}-{entry}-"
    return base if len(base) <= MAX_BASE else f"{pod_name[:PART]}-{entry[:PART]}-"


def pod_done(pod: Mapping[str, Any]) -> bool:
    """Finished (kube's IsPodTerminal): its claims are not needed any more."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


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
        """Queue every claim that names the pod as owner or consumer."""
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
        if pod is None or meta(pod).get("deletionTimestamp") or pod_done(pod):
            return
        namespace, pod_name = split_key(key)
        named = {str(s.get("name")) for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        statuses = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template = entry.get("resourceClaimTemplateName")
            if not template or entry.get("name") in named:
                continue
            claim = self._owned_claim(pod, str(entry["name"])) or self._create_claim(
                pod, entry, str(template)
            )
            statuses.append({"name": entry["name"], "resourceClaimName": meta(claim)["name"]})
        if statuses:
            patch = {"metadata": {"uid": meta(pod)["uid"]}, "status": {"resourceClaimStatuses": statuses}}
            self.client.patch(PODS, pod_name, patch, namespace, subresource="status", decode=False)

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

    def _live_pod(self, namespace: str, name: str, uid: str) -> Obj | None:
        pod = self.pods.get(f"{namespace}/{name}")
        return pod if pod is not None and meta(pod).get("uid") == uid and not pod_done(pod) else None

    def _sync_claim(self, key: str) -> None:
        claim = self.claims.get(key)
        if claim is None:
            return
        namespace, name = split_key(key)
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        valid = [
            r
            for r in reserved
            if r.get("resource") != "pods"
            or r.get("apiGroup")
            or self._live_pod(namespace, str(r.get("name")), str(r.get("uid"))) is not None
        ]
        if len(valid) != len(reserved):
            body = {**claim, "status": {**status, "reservedFor": valid}}
            if not valid:
                del body["status"]["reservedFor"]
            claim = self.client.update(RESOURCE_CLAIMS, body, subresource="status")
        owner, owner_uid = owner_pod(claim)
        if not owner_uid or valid or meta(claim).get("deletionTimestamp"):
            return
        if self._live_pod(namespace, owner, owner_uid) is not None:
            return
        with contextlib.suppress(NotFound):
            self.client.delete(RESOURCE_CLAIMS, name, namespace, uid=str(meta(claim).get("uid")))
