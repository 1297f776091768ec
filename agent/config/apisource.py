"""The API server as a pod source: the pods bound to this node, from a list-then-watch informer.

As the kubelet's config/apiserver.go: one informer on pods in every namespace with
`fieldSelector=spec.nodeName=<node>`; every change makes a new complete snapshot, handed to
the agent through the same `PodSource` path as the manifest directory (so both sources merge
into one desired set). Snapshots are built on a thread of their own, so a burst of watch
events (110 pods bound at once) becomes a few snapshots, not one per event.

Each object is decoded with the model's parser (the API server's defaults and validation);
a pod that fails (an unknown resource, a bad quantity) is not run: it is reported through
`on_invalid` (the status manager marks it Failed and records an event naming the field) and
listed in the snapshot's errors. Mirror pods (annotation kubernetes.io/config.mirror) are the
agent's own reflections of static pods: they are never run, only handed to `on_mirrors`.

`ready` stays False until the first LIST has arrived: until then the agent does not treat
pods it finds running as orphans (an API outage at start must not kill them).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agent.config.sources import ManifestError, SourceSnapshot
from kubenode.kubeclient import PODS, KubeClient
from kubenode.kubeclient.informer import Informer, object_key
from kubenode.kubeclient.timefmt import rfc3339
from kubenode.model import Pod, ValidationError, parse_pod

log = logging.getLogger(__name__)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
API_SOURCE = "api"
FIRST_SYNC_WAIT_S = 10.0


@dataclass(frozen=True)
class ApiPod:
    """One pod object of this node, decoded: a runnable Pod, a mirror pod, or an invalid one."""

    key: str
    uid: str
    raw: Mapping[str, Any]
    pod: Pod | None = None
    error: ValidationError | None = None

    @property
    def mirror(self) -> bool:
        return MIRROR_ANNOTATION in ((self.raw.get("metadata") or {}).get("annotations") or {})


UNKNOWN_FIELD = "unknown field"
MAX_DROPPED_FIELDS = 32
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _without(obj: Any, path: str) -> Any:
    """A copy of obj without the field at `path` (spec.containers[0].newField); obj if it is not there."""
    parts = [(name, index) for name, index in _PATH_PART.findall(path)]
    if not parts:
        return obj
    name, index = parts[0]
    rest = path[len(name) if name else len(index) + 2 :].lstrip(".")
    if name and isinstance(obj, Mapping) and name in obj:
        if not rest:
            return {k: v for k, v in obj.items() if k != name}
        return {**obj, name: _without(obj[name], rest)}
    if index and isinstance(obj, list) and int(index) < len(obj):
        copy = list(obj)
        copy[int(index)] = _without(copy[int(index)], rest)
        return copy
    return obj


def decode_api_pod(obj: dict[str, Any]) -> ApiPod:
    key = object_key(obj)
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    readable: Any = obj
    for _ in range(MAX_DROPPED_FIELDS):
        try:
            pod = parse_pod(readable, f"pod {key}")
            break
        except ValidationError as exc:
            # The API server has validated the pod already; a field our model does not know is one newer
            # than it, and the kubelet ignores what it does not know (Go's JSON decoding drops it): so do we.
            if exc.message != UNKNOWN_FIELD or _without(readable, exc.field) is readable:
                return ApiPod(key, uid, obj, error=exc)
            log.debug("pod %s: ignoring the field %s this agent does not know", key, exc.field)
            readable = _without(readable, exc.field)
    else:
        return ApiPod(key, uid, obj, error=ValidationError(f"pod {key}", "", "too many unknown fields"))
    pod = replace(pod, raw=obj)
    # As the kubelet's config merger: a change of status alone (most often our own write coming back)
    # is not an update of the pod. Only a terminal phase matters to the workers (a finished pod is not
    # started again), so the rest of the status is left out of the Pod the agent compares.
    phase = pod.phase if pod.phase in ("Succeeded", "Failed") else "Pending"
    return ApiPod(
        key, uid, obj, pod=replace(pod, source=API_SOURCE, phase=phase, start_time="", nominated_node_name="")
    )


class ApiPodSource:
    name = API_SOURCE

    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        *,
        on_invalid: Callable[[ApiPod], None] = lambda pod: None,
        on_mirrors: Callable[[list[ApiPod]], None] = lambda pods: None,
        backoff_max: float = 10.0,
        first_sync_wait: float = FIRST_SYNC_WAIT_S,
    ) -> None:
        self.node_name = node_name
        self.on_invalid = on_invalid
        self.on_mirrors = on_mirrors
        self.first_sync_wait = first_sync_wait
        self.informer: Informer[ApiPod] = Informer(
            client,
            PODS,
            field_selector=f"spec.nodeName={node_name}",
            decode=decode_api_pod,
            on_add=self._changed,
            on_update=lambda old, new: self._changed(new),
            on_delete=self._deleted,
            backoff_max_s=backoff_max,
            name="pods",
        )
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reported: dict[str, str] = {}  # key -> uid of invalid pods already reported
        # Pods deleted at once (grace 0, a forced delete) whose last version the agent has not seen yet:
        # delivered once as an update (deletionTimestamp, grace 0), so their kill uses that grace.
        self._tombstones: dict[str, Pod] = {}
        self._tombstone_lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self.informer.has_synced.is_set()

    def start(self, on_change: Callable[[SourceSnapshot], None]) -> None:
        self.informer.start()
        if self.informer.wait_for_sync(self.first_sync_wait):
            self._dirty.clear()
            on_change(self.snapshot())
        else:
            log.warning("no pod list from the API server yet; pods found running are kept until it comes")
        self._thread = threading.Thread(target=self._run, args=(on_change,), name="api-source", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()
        self.informer.stop()
        if self._thread is not None:
            self._thread.join(5)

    def _changed(self, pod: ApiPod) -> None:
        del pod
        self._dirty.set()

    def _deleted(self, item: ApiPod) -> None:
        pod = item.pod
        if pod is not None and not item.mirror:
            if pod.deletion_timestamp is None:
                # kube-apiserver stamps an immediate delete with deletionTimestamp and grace 0 (BeforeDelete);
                # a server that does not still meant it: the pod is gone now, so is its grace period.
                pod = replace(pod, deletion_timestamp=rfc3339(), deletion_grace_period_seconds=0)
            with self._tombstone_lock:
                self._tombstones[item.uid] = pod
        self._dirty.set()

    def _run(self, on_change: Callable[[SourceSnapshot], None]) -> None:
        while not self._stop.is_set():
            self._dirty.wait()
            if self._stop.is_set():
                return
            self._dirty.clear()
            if not self.ready:
                continue
            with self._tombstone_lock:
                tombstones, self._tombstones = self._tombstones, {}
            try:
                if tombstones:
                    on_change(self.snapshot(tombstones.values()))  # the last version first, then without
                on_change(self.snapshot())
            except Exception:
                log.exception("delivering the API pods to the agent")

    def snapshot(self, deleted: Iterable[Pod] = ()) -> SourceSnapshot:
        pods: list[Pod] = list(deleted)
        errors: list[ManifestError] = []
        mirrors: list[ApiPod] = []
        for item in self.informer.items():
            if item.mirror:
                mirrors.append(item)
            elif item.pod is not None:
                pods.append(item.pod)
            elif item.error is not None:
                errors.append(ManifestError(item.error.source, item.error.field, item.error.message))
                if self._reported.get(item.key) != item.uid:
                    self._reported[item.key] = item.uid
                    self.on_invalid(item)
        live = {item.key for item in self.informer.items()}
        for key in list(self._reported):
            if key not in live:
                del self._reported[key]
        self.on_mirrors(mirrors)
        return SourceSnapshot(self.name, tuple(pods), tuple(errors))
