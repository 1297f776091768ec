"""The Node authorizer's graph: which ConfigMaps and Secrets each node may read.

kube's plugin/pkg/auth/authorizer/node keeps a graph fed by informers (pod -> node edges, secret and
configmap -> pod edges) and lets a node read a Secret or ConfigMap only along a path to itself. Here the
graph is caught up lazily from the watch cache: on each question it applies the pod events committed since
it last looked (`WatchCache.since`), or rebuilds from the cached pods when its window was compacted away.
A pod counts once it is bound (`spec.nodeName`), as in kube's graph populator; a deleted pod drops its edges.

References follow kube's VisitPodSecretNames / VisitPodConfigmapNames: volumes (secret, configMap,
projected sources, and the volume plugins' secretRefs), env valueFrom, envFrom, imagePullSecrets, in every
kind of container.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from apiserver.storage.cache import Entry, Filter, WatchCache

Ref = tuple[str, str, str]  # (resource, namespace, name)
# Volume plugins with a secretRef (kube's VisitPodSecretNames), and azureFile's secretName.
SECRET_REF_VOLUMES = ("cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos", "csi")


def pod_references(pod: Mapping[str, Any]) -> set[Ref]:
    """The Secrets, ConfigMaps and ResourceClaims a pod refers to, as (resource, namespace, name)."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    spec = pod.get("spec") or {}
    refs = {(resource, namespace, name) for resource, name in _names(spec) if name}
    return refs | {("resourceclaims", namespace, name) for name in _claim_names(pod) if name}


def _claim_names(pod: Mapping[str, Any]) -> Iterator[str]:
    """Claims named directly and claims made from templates (kube's graph_populator adds both)."""
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        yield str(entry.get("resourceClaimName") or "")
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        yield str(entry.get("resourceClaimName") or "")


def _names(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for secret in spec.get("imagePullSecrets") or []:
        yield "secrets", str(secret.get("name") or "")
    for volume in spec.get("volumes") or []:
        yield from _volume_names(volume)
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    for container in [*containers, *(spec.get("ephemeralContainers") or [])]:
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if source.get("secretKeyRef"):
                yield "secrets", str(source["secretKeyRef"].get("name") or "")
            if source.get("configMapKeyRef"):
                yield "configmaps", str(source["configMapKeyRef"].get("name") or "")
        for env_from in container.get("envFrom") or []:
            if env_from.get("secretRef"):
                yield "secrets", str(env_from["secretRef"].get("name") or "")
            if env_from.get("configMapRef"):
                yield "configmaps", str(env_from["configMapRef"].get("name") or "")


def _volume_names(volume: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if volume.get("secret"):
        yield "secrets", str(volume["secret"].get("secretName") or "")
    if volume.get("configMap"):
        yield "configmaps", str(volume["configMap"].get("name") or "")
    for source in (volume.get("projected") or {}).get("sources") or []:
        if source.get("secret"):
            yield "secrets", str(source["secret"].get("name") or "")
        if source.get("configMap"):
            yield "configmaps", str(source["configMap"].get("name") or "")
    for plugin in SECRET_REF_VOLUMES:
        config = volume.get(plugin) or {}
        ref = config.get("nodePublishSecretRef") if plugin == "csi" else config.get("secretRef")
        if ref:
            yield "secrets", str(ref.get("name") or "")
    if volume.get("azureFile"):
        yield "secrets", str(volume["azureFile"].get("secretName") or "")


class NodeGraph:
    """Answers `has_path(node, resource, namespace, name)` from the pods in the watch cache."""

    def __init__(self, cache: WatchCache) -> None:
        self.cache = cache
        self.revision = -1  # nothing seen yet: the first question builds from scratch
        # pod -> (node, references, whether its status names claims)
        self.pods: dict[tuple[str, str], tuple[str, set[Ref], bool]] = {}
        self.edges: dict[str, Counter[Ref]] = {}  # node -> reference -> how many of its pods

    def has_path(self, node: str, resource: str, namespace: str, name: str) -> bool:
        if self.revision != self.cache.revision:
            self._catch_up()
        counts = self.edges.get(node)
        return counts is not None and counts[(resource, namespace, name)] > 0

    def _catch_up(self) -> None:
        cache = self.cache
        events = cache.since("pods", self.revision) if self.revision >= 0 else None
        if events is None:
            self.pods.clear()
            self.edges.clear()
            for entry in cache.entries("pods", Filter()):
                self._set(entry, deleted=False)
        else:
            for event in events:
                self._set(event.entry, deleted=event.type == "DELETED")
        self.revision = cache.revision

    def _set(self, entry: Entry, *, deleted: bool) -> None:
        key = (entry.namespace, entry.name)
        node = entry.fields.get("spec.nodeName", "")
        previous = self.pods.get(key)
        refs: set[Ref] | None = None
        if not deleted and previous is not None and previous[0] == node:
            # A status or metadata change: the references are in the spec, which a pod never changes, and in
            # status.resourceClaimStatuses, which may change after the binding (an admin, a controller; not
            # the node: NodeRestriction). kube's graph populator re-adds the pod when they do; so does this,
            # so the graph is the one a rebuild from the stored pods makes (after a restart).
            if b'"resourceClaimStatuses"' not in entry.data and not previous[2]:
                return
            refs = pod_references(orjson.loads(entry.data))
            if refs == previous[1]:
                return
        self.pods.pop(key, None)
        if previous is not None:
            old_node, old_refs, _ = previous
            counts = self.edges[old_node]
            counts.subtract(old_refs)
            for ref in old_refs:
                if counts[ref] <= 0:
                    del counts[ref]
        if deleted:
            return
        if not node:
            return  # not bound yet: no edge to any node
        if refs is None:
            refs = pod_references(orjson.loads(entry.data))
        self.pods[key] = (node, refs, b'"resourceClaimStatuses"' in entry.data)
        self.edges.setdefault(node, Counter()).update(refs)
