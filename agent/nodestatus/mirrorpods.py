"""Mirror pods: each static (manifest) pod reflected into the API server, as the kubelet's mirror client does.

A mirror pod is the static pod's object with the annotation kubernetes.io/config.mirror set to the static
pod's hash (its UID here), kubernetes.io/config.source "file", spec.nodeName this node, and a controller
ownerReference to the Node (NodeRestriction lets a node create only such pods). The reconciler (one thread,
woken when the API source sees mirror pods change, and every `interval` while the agent has a source of static
pods or mirrors exist) creates a missing mirror, replaces one whose hash is stale or that is being deleted,
and deletes mirrors (grace 0, uid precondition) whose static pod is gone. Mirrors are never run: the API
source hands them here instead of to the agent. The static pod's status is written to its mirror
(`mirror_of`).

Unlike the kubelet, a static pod keeps the name written in its manifest (no `-<node>` suffix; see
agent/config/sources.py), so the mirror has that name too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.config.apisource import API_SOURCE, MIRROR_ANNOTATION, ApiPod
from agent.config.sources import CONFIG_HASH, CONFIG_MIRROR_SOURCE, CONFIG_SOURCE
from agent.status.statusmanager import StatusTarget
from agent.util.background import BackgroundLoop
from kubenode.kubeclient import PODS, AlreadyExists, Conflict, KubeClient, KubeError, NotFound
from kubenode.model import Pod

if TYPE_CHECKING:
    from agent.node import NodeAgent

log = logging.getLogger(__name__)


def mirror_body(pod: Pod, node_name: str, node_uid: str) -> dict[str, Any]:
    raw = dict(pod.raw)
    meta = dict(raw.get("metadata") or {})
    annotations = {
        **pod.annotations,
        CONFIG_HASH: pod.uid,
        CONFIG_SOURCE: CONFIG_MIRROR_SOURCE,
        MIRROR_ANNOTATION: pod.uid,
    }
    metadata: dict[str, Any] = {
        "name": pod.name,
        "namespace": pod.namespace,
        "annotations": annotations,
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True}
        ],
    }
    if meta.get("labels"):
        metadata["labels"] = dict(meta["labels"])
    spec = dict(raw.get("spec") or {})
    spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


class MirrorPods(BackgroundLoop):
    thread_name = "mirror-pods"

    def __init__(
        self,
        client: KubeClient,
        agent: NodeAgent,
        node_name: str,
        node_uid: Callable[[], str],
        *,
        interval: float = 2.0,
        on_mirrors_changed: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__()
        self.client = client
        self.agent = agent
        self.node_name = node_name
        self.node_uid = node_uid
        self.interval = interval
        self.on_mirrors_changed = on_mirrors_changed
        self._lock = threading.Lock()
        self._mirrors: dict[str, ApiPod] = {}  # by namespace/name
        self._known = False  # the API source has delivered its list

    def mirrors_seen(self, mirrors: list[ApiPod]) -> None:
        fresh = {m.key: m for m in mirrors}
        with self._lock:
            changed = {k: m.uid for k, m in fresh.items()} != {k: m.uid for k, m in self._mirrors.items()}
            self._mirrors = fresh
            self._known = True
        self._wake.set()
        if changed:
            self.on_mirrors_changed()

    def mirror_of(self, static_uid: str) -> StatusTarget | None:
        with self._lock:
            for m in self._mirrors.values():
                annotations = (m.raw.get("metadata") or {}).get("annotations") or {}
                if annotations.get(MIRROR_ANNOTATION) == static_uid:
                    meta = m.raw.get("metadata") or {}
                    return StatusTarget(str(meta.get("namespace")), str(meta.get("name")), m.uid)
        return None

    def _period(self) -> float | None:
        """Every `interval` while there is something to reconcile: a source of static pods (a manifest
        directory, a URL), or mirror pods seen. An agent whose only source is the API server with no mirror
        pods (a hollow node) has nothing, and sleeps until the API source sees mirrors (`mirrors_seen`)."""
        with self._lock:
            if self._mirrors:
                return self.interval
        return self.interval if self.agent.views.has_sources_besides(API_SOURCE) else None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._period())
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.reconcile()
            except KubeError as exc:
                log.warning("mirror pods: %s", exc)
            except Exception:  # the loop must outlive a bug in one round
                log.exception("mirror pods")

    def reconcile(self) -> None:
        node_uid = self.node_uid()
        with self._lock:
            if not node_uid or not self._known:
                return
            mirrors = dict(self._mirrors)
        static = {
            v.pod.key: v.pod
            for v in self.agent.views.views_not_from(API_SOURCE)
            if v.pod is not None and v.worker not in ("terminated", "rejected")
        }
        for key, mirror in list(mirrors.items()):
            pod = static.get(key)
            annotations = (mirror.raw.get("metadata") or {}).get("annotations") or {}
            deleting = (mirror.raw.get("metadata") or {}).get("deletionTimestamp")
            if pod is None or annotations.get(MIRROR_ANNOTATION) != pod.uid or deleting:
                self._delete(mirror)
                mirrors.pop(key)
        for key, pod in static.items():
            if key not in mirrors:
                self._create(pod, node_uid)

    def _create(self, pod: Pod, node_uid: str) -> None:
        try:
            self.client.create(PODS, mirror_body(pod, self.node_name, node_uid), pod.namespace)
            log.info("created mirror pod %s", pod.key)
        except AlreadyExists:
            pass  # seen at the next reconcile, and replaced if stale

    def _delete(self, mirror: ApiPod) -> None:
        meta = mirror.raw.get("metadata") or {}
        try:
            self.client.delete(
                PODS,
                str(meta.get("name")),
                str(meta.get("namespace")),
                grace_period_seconds=0,
                uid=mirror.uid,
            )
            log.info("deleted mirror pod %s", mirror.key)
        except (NotFound, Conflict):
            pass
