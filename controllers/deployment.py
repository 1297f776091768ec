"""The Deployment controller (kube's pkg/controller/deployment), on the shared informers.

Flow of `sync(namespace/name)`:
1. Claim ReplicaSets (controllerRef to this Deployment, adopting matching orphans, releasing those
   that stopped matching). The new ReplicaSet is the one whose template equals the Deployment's but
   for `pod-template-hash`; the rest are old. A deleting Deployment only gets its status.
2. Paused: no rollout; the new ReplicaSet (if it is the only one with replicas) follows `replicas`.
3. RollingUpdate (kube's rolloutRolling): make the new ReplicaSet (`<name>-<hash>`, revision = the
   highest old revision + 1; an old one that matches again, as after `kubectl rollout undo`, gets that
   revision), grow it as far as maxSurge allows, then shrink old ones as far as maxUnavailable allows
   (unhealthy replicas first), counting from spec replicas so a stale status never takes the
   Deployment below replicas - maxUnavailable. Complete rollouts delete old ReplicaSets beyond
   revisionHistoryLimit.
4. Recreate: old ReplicaSets to 0, wait until their pods are gone, then the new one to replicas.
5. Status from the ReplicaSets' status, with kube's Available and Progressing conditions
   (NewReplicaSetCreated, ReplicaSetUpdated, NewReplicaSetAvailable, ProgressDeadlineExceeded,
   DeploymentPaused/Resumed); an unfinished rollout is synced again when its progress deadline would pass.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from controllers import deploymentutil as du
from controllers.framework import Controller, Obj, SharedInformers, key_of, meta
from controllers.pods import adopt_patch, claim, controller_ref, owner_ref, release_patch, seconds
from controllers.replicaset import write_status
from controllers.resources import DEPLOYMENTS, REPLICASETS
from kubenode.kubeclient import AlreadyExists, KubeClient, KubeError, NotFound
from kubenode.kubeclient.timefmt import rfc3339
from kubenode.labelselector import matches


def _owner_name(rs: Obj) -> str:
    ref = controller_ref(rs)
    return str(ref.get("name")) if ref else ""


def _created(obj: Obj) -> float:
    return seconds(meta(obj).get("creationTimestamp")) or 0.0


class DeploymentController(Controller):
    name = "deployment"

    def __init__(
        self,
        client: KubeClient,
        informers: SharedInformers,
        may_act: Callable[[], bool],
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(client, may_act, clock)
        self.deployments = informers.on(DEPLOYMENTS, add=self.enqueue, update=lambda _o, n: self.enqueue(n),
                                        delete=self.enqueue)  # fmt: skip
        self.replicasets = informers.on(REPLICASETS, add=self._rs_changed,
                                        update=self._rs_updated,
                                        delete=self._rs_changed)  # fmt: skip

    def enqueue(self, obj: Obj) -> None:
        self.enqueue_key(key_of(obj))

    def _rs_updated(self, old: Obj, new: Obj) -> None:
        self._rs_changed(old)
        self._rs_changed(new)

    def _rs_changed(self, rs: Obj) -> None:
        namespace = meta(rs).get("namespace")
        ref = controller_ref(rs)
        if ref is not None:
            if ref.get("kind") == "Deployment":
                self.enqueue_key(f"{namespace}/{ref.get('name')}")
            return
        for d in self.deployments.items():
            if meta(d).get("namespace") == namespace and matches((d.get("spec") or {}).get("selector"),
                                                                 meta(rs).get("labels")):  # fmt: skip
                self.enqueue(d)

    # ----- ReplicaSets -------------------------------------------------------------------------

    def _claim(self, d: Obj) -> list[Obj]:
        namespace = meta(d).get("namespace")
        candidates = [rs for rs in self.replicasets.items() if meta(rs).get("namespace") == namespace]
        owned, adopt, release = claim(d, (d.get("spec") or {}).get("selector"), candidates)
        for rs in adopt:
            with contextlib.suppress(NotFound):
                owned.append(self.client.patch(REPLICASETS, meta(rs)["name"], adopt_patch(d, rs), namespace))
        for rs in release:
            with contextlib.suppress(NotFound):
                self.client.patch(REPLICASETS, meta(rs)["name"], release_patch(d, rs), namespace)
        return sorted(owned, key=_created)

    def _find_new(self, d: Obj, rss: list[Obj]) -> Obj | None:
        template = (d.get("spec") or {}).get("template") or {}
        return next(
            (rs for rs in rss if du.same_template((rs.get("spec") or {}).get("template") or {}, template)),
            None,
        )

    def _annotations(self, d: Obj, revision: int) -> dict[str, str]:
        surge, _ = du.surge_and_unavailable(d)
        replicas = du.spec_replicas(d)
        wanted = {
            du.REVISION: str(revision),
            du.DESIRED_REPLICAS: str(replicas),
            du.MAX_REPLICAS: str(replicas + surge),
        }
        cause = (meta(d).get("annotations") or {}).get(du.CHANGE_CAUSE)
        if cause:
            wanted[du.CHANGE_CAUSE] = cause
        return wanted

    def _new_rs(self, d: Obj, rss: list[Obj], create: bool, replicas: int) -> tuple[Obj | None, bool]:
        """The new ReplicaSet (made if `create`) with up-to-date annotations, and whether it was made now."""
        existing = self._find_new(d, rss)
        old_max = du.max_revision([rs for rs in rss if rs is not existing])
        if existing is not None:
            revision = du.revision(existing) if du.revision(existing) > old_max else old_max + 1
            wanted = self._annotations(d, revision)
            current = meta(existing).get("annotations") or {}
            if any(current.get(k) != v for k, v in wanted.items()):
                body = {**existing, "metadata": {**meta(existing), "annotations": {**current, **wanted}}}
                existing = self.client.update(REPLICASETS, body)
            self._set_revision(d, revision)
            return existing, False
        if not create:
            return None, False
        spec = d.get("spec") or {}
        status = d.get("status") or {}
        template = du.without_hash(spec.get("template") or {})
        pod_hash = du.template_hash(template, int(status.get("collisionCount") or 0))
        labels = {**((template.get("metadata") or {}).get("labels") or {}), du.HASH_LABEL: pod_hash}
        template["metadata"] = {**(template.get("metadata") or {}), "labels": labels}
        selector = dict(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), du.HASH_LABEL: pod_hash}
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta(d)['name']}-{pod_hash}", "namespace": meta(d).get("namespace"),
                "labels": labels,
                "annotations": self._annotations(d, old_max + 1), "ownerReferences": [owner_ref(d)],
            },
            "spec": {
                "replicas": replicas, "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                "selector": selector, "template": template,
            },
        }  # fmt: skip
        try:
            made = self.client.create(REPLICASETS, body, meta(d).get("namespace"))
        except AlreadyExists:
            clash = self.client.get(REPLICASETS, body["metadata"]["name"], meta(d).get("namespace"))
            if controller_ref(clash) and controller_ref(clash).get("uid") == meta(d).get("uid"):  # type: ignore[union-attr]
                return clash, False
            # A hash collision: count it, so the next sync hashes differently (kube's collisionCount).
            bumped = {**status, "collisionCount": int(status.get("collisionCount") or 0) + 1}
            self.client.update(DEPLOYMENTS, {**d, "status": bumped}, subresource="status")
            raise KubeError(
                f"ReplicaSet {body['metadata']['name']} exists and is not this Deployment's"
            ) from None
        self._set_revision(d, old_max + 1)
        if replicas:
            self.event(
                d,
                "ScalingReplicaSet",
                f"Scaled up replica set {body['metadata']['name']} from 0 to {replicas}",
            )
        return made, True

    def _set_revision(self, d: Obj, revision: int) -> None:
        if (meta(d).get("annotations") or {}).get(du.REVISION) != str(revision):
            patch = {"metadata": {"annotations": {du.REVISION: str(revision)}}}
            self.client.patch(
                DEPLOYMENTS, meta(d)["name"], patch, meta(d).get("namespace"), patch_type="merge"
            )

    def _scale(self, rs: Obj, replicas: int, d: Obj | None = None) -> Obj:
        before = du.spec_replicas(rs)
        if before == replicas:
            return rs
        body = {**rs, "spec": {**(rs.get("spec") or {}), "replicas": replicas}}
        scaled = self.client.update(REPLICASETS, body)
        owner = d if d is not None else self.deployments.get(f"{meta(rs).get('namespace')}/{_owner_name(rs)}")
        if owner is not None:
            direction = "up" if replicas > before else "down"
            message = f"Scaled {direction} replica set {meta(rs).get('name')} from {before} to {replicas}"
            self.event(owner, "ScalingReplicaSet", message)
        return scaled

    # ----- one Deployment ----------------------------------------------------------------------

    def sync(self, key: str) -> None:
        d = self.deployments.get(key)
        if d is None:
            return
        rss = self._claim(d)
        spec = d.get("spec") or {}
        if meta(d).get("deletionTimestamp"):
            self._sync_status(d, rss, self._find_new(d, rss), False)
            return
        if spec.get("paused"):
            new, _ = self._new_rs(d, rss, False, 0)
            if new is not None and all(du.spec_replicas(rs) == 0 for rs in rss if rs is not new):
                new = self._scale(new, du.spec_replicas(d))
            self._sync_status(d, self._replace(rss, new), new, False)
            return
        if (spec.get("strategy") or {}).get("type") == "Recreate":
            self._recreate(d, rss)
        else:
            self._rolling(d, rss)

    @staticmethod
    def _replace(rss: list[Obj], new: Obj | None) -> list[Obj]:
        if new is None:
            return rss
        uid = meta(new).get("uid")
        return [rs for rs in rss if meta(rs).get("uid") != uid] + [new]

    def _rolling(self, d: Obj, rss: list[Obj]) -> None:
        new, created = self._new_rs(d, rss, True, du.new_rs_replicas(d, rss, None))
        assert new is not None
        rss = self._replace(rss, new)
        olds = [rs for rs in rss if rs is not new]
        replicas = du.spec_replicas(d)
        target = replicas if du.spec_replicas(new) > replicas else du.new_rs_replicas(d, rss, new)
        if target != du.spec_replicas(new):
            new = self._scale(new, target)
            self._sync_status(d, self._replace(rss, new), new, created)
            return
        olds = self._scale_down_olds(d, olds, new)
        rss = [*olds, new]
        if self._complete(d, rss, new):
            self._cleanup(d, olds)
        self._sync_status(d, rss, new, created)

    def _scale_down_olds(self, d: Obj, olds: list[Obj], new: Obj) -> list[Obj]:
        """kube's reconcileOldReplicaSets: never below replicas - maxUnavailable, counted from specs."""
        if sum(du.spec_replicas(rs) for rs in olds) == 0:
            return olds
        _, max_unavailable = du.surge_and_unavailable(d)
        min_available = du.spec_replicas(d) - max_unavailable
        total = sum(du.spec_replicas(rs) for rs in [*olds, new])
        new_unavailable = du.spec_replicas(new) - du.status_count(new, "availableReplicas")
        room = total - min_available - new_unavailable
        if room <= 0:
            return olds
        result = []
        for rs in olds:  # unhealthy replicas first (cleanupUnhealthyReplicas)
            unhealthy = du.spec_replicas(rs) - du.status_count(rs, "availableReplicas")
            if room > 0 and unhealthy > 0:
                down = min(room, unhealthy)
                rs = self._scale(rs, du.spec_replicas(rs) - down)
                room -= down
            result.append(rs)
        available = sum(du.status_count(rs, "availableReplicas") for rs in [*result, new])
        excess = available - min_available
        final = []
        for rs in result:  # oldest first (scaleDownOldReplicaSetsForRollingUpdate)
            if excess > 0 and du.spec_replicas(rs) > 0:
                down = min(excess, du.spec_replicas(rs))
                rs = self._scale(rs, du.spec_replicas(rs) - down)
                excess -= down
            final.append(rs)
        return final

    def _recreate(self, d: Obj, rss: list[Obj]) -> None:
        new, _ = self._new_rs(d, rss, False, 0)
        olds = [self._scale(rs, 0) for rs in rss if rs is not new]
        if any(du.status_count(rs, "replicas") for rs in olds) or any(
            du.spec_replicas(rs) for rs in rss if rs is not new and du.spec_replicas(rs)
        ):
            self._sync_status(d, [*olds, *([new] if new else [])], new, False)
            return
        new, created = self._new_rs(d, olds, True, du.spec_replicas(d))
        assert new is not None
        new = self._scale(new, du.spec_replicas(d))
        self._sync_status(d, [*olds, new], new, created)

    def _complete(self, d: Obj, rss: list[Obj], new: Obj) -> bool:
        replicas = du.spec_replicas(d)
        return (
            du.status_count(new, "replicas") == replicas
            and sum(du.status_count(rs, "replicas") for rs in rss) == replicas
            and sum(du.status_count(rs, "availableReplicas") for rs in rss) >= replicas
        )

    def _cleanup(self, d: Obj, olds: list[Obj]) -> None:
        limit = int((d.get("spec") or {}).get("revisionHistoryLimit", 10))
        idle = [rs for rs in olds if du.spec_replicas(rs) == 0 and du.status_count(rs, "replicas") == 0]
        for rs in sorted(idle, key=du.revision)[: max(0, len(idle) - limit)]:
            with contextlib.suppress(NotFound):
                self.client.delete(
                    REPLICASETS, meta(rs)["name"], meta(rs).get("namespace"), uid=meta(rs).get("uid")
                )

    # ----- status ------------------------------------------------------------------------------

    def _sync_status(self, d: Obj, rss: list[Obj], new: Obj | None, created: bool) -> None:
        old_status: dict[str, Any] = dict(d.get("status") or {})
        status: dict[str, Any] = dict(old_status)
        replicas = du.spec_replicas(d)
        counts = {
            "replicas": sum(du.status_count(rs, "replicas") for rs in rss),
            "updatedReplicas": du.status_count(new, "replicas") if new else 0,
            "readyReplicas": sum(du.status_count(rs, "readyReplicas") for rs in rss),
            "availableReplicas": sum(du.status_count(rs, "availableReplicas") for rs in rss),
        }
        status.update(counts, observedGeneration=meta(d).get("generation", 0))
        status["unavailableReplicas"] = max(replicas - counts["availableReplicas"], 0)
        now_s = self.clock()
        now = rfc3339(now_s)
        _, max_unavailable = du.surge_and_unavailable(d)
        if counts["availableReplicas"] >= replicas - max_unavailable:
            available = ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
        else:
            available = (
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            )
        du.set_condition(status, du.condition("Available", *available, now))
        self._progressing(d, status, old_status, new, created, now_s)
        write_status(self.client, DEPLOYMENTS, d, status)

    def _progressing(self, d: Obj, status: dict[str, Any], old: dict[str, Any], new: Obj | None,
                     created: bool, now_s: float) -> None:  # fmt: skip
        now = rfc3339(now_s)
        spec = d.get("spec") or {}
        name = meta(new).get("name") if new else ""
        current = du.get_condition(old, "Progressing")
        if spec.get("paused"):
            du.set_condition(
                status,
                du.condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused", now),
            )
            return
        if current is not None and current.get("reason") == "DeploymentPaused":
            du.set_condition(
                status,
                du.condition("Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed", now),
            )
            return
        replicas = du.spec_replicas(d)
        complete = (
            status.get("updatedReplicas") == replicas
            and status.get("replicas") == replicas
            and int(status.get("availableReplicas") or 0) >= replicas
        )
        if complete:
            message = f'ReplicaSet "{name}" has successfully progressed.'
            du.set_condition(
                status, du.condition("Progressing", "True", "NewReplicaSetAvailable", message, now)
            )
            return
        if created:
            message = f'Created new replica set "{name}"'
            du.set_condition(
                status, du.condition("Progressing", "True", "NewReplicaSetCreated", message, now)
            )
            self._recheck_at(d, float(spec.get("progressDeadlineSeconds") or 600))
            return
        moved = any(
            int(status.get(k) or 0) > int(old.get(k) or 0)
            for k in ("updatedReplicas", "readyReplicas", "availableReplicas")
        )
        moved = moved or int(status.get("replicas") or 0) < int(old.get("replicas") or 0)
        if moved or current is None:
            message = f'ReplicaSet "{name}" is progressing.'
            condition = du.condition("Progressing", "True", "ReplicaSetUpdated", message, now)
            if current is not None and current.get("status") == "True":
                condition["lastTransitionTime"] = current.get("lastTransitionTime", now)
            status["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") != "Progressing"
            ] + [condition]
            self._recheck_at(d, float(spec.get("progressDeadlineSeconds") or 600))
            return
        if current is None or current.get("reason") == "ProgressDeadlineExceeded":
            return
        deadline = float(spec.get("progressDeadlineSeconds") or 600)
        last = seconds(current.get("lastUpdateTime")) or now_s
        if last + deadline <= now_s:
            message = f'ReplicaSet "{name}" has timed out progressing.'
            du.set_condition(
                status, du.condition("Progressing", "False", "ProgressDeadlineExceeded", message, now)
            )
        else:
            self._recheck_at(d, last + deadline - now_s)

    def _recheck_at(self, d: Obj, delay: float) -> None:
        self.queue.add_after(key_of(d), max(delay, 0.0) + 1.0)
