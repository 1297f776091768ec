"""The status manager: pod status into the API server, the kubelet's events, and the final DELETE.

Flow (one thread): the agent pokes a pod's UID after every sync (`pod_synced`); the thread
takes every poked UID (and, every `resync_interval`, every pod whose last poke it has not yet
computed: the kubelet's syncBatch looks at every pod and sends those whose status version is
newer than the one sent; a pod that nothing changed is not computed again), computes the pod's API
status from the agent's record (agent/status/podstatus.py), and:
- records the kubelet's events from what changed since the last computed status: Started
  (a container started), BackOff (a container waits in CrashLoopBackOff), Failed (a container
  could not be started or configured), Killing (termination began; from `pod_synced` with
  operation "killing"), and the admission reason for a rejected pod;
- if the status differs from the last one written, PATCHes pods/<name>/status (strategic
  merge, with metadata.uid as precondition). A static pod's status goes to its mirror pod.
  A write that fails for want of a server stays queued; since the status is recomputed
  from the record when it is retried, only the latest state is ever sent (coalescing).
  404 (gone) or 409 (the uid no longer matches: a new pod of that name) drop it.
- a pod with a deletionTimestamp whose worker has finished (processes stopped, cgroup removed,
  devices freed) is DELETEd with grace 0 and a uid precondition; never a mirror or static pod.

Invalid pods (the API source could not decode them) get phase Failed, reason InvalidPodSpec,
and a Failed event naming the field. Metrics (pod start duration) are observed here too.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agent.config.apisource import API_SOURCE, ApiPod
from agent.status.podstatus import api_pod_status, rejected_status
from agent.util.background import BackgroundLoop
from kubenode.kubeclient import PODS, ApiError, Conflict, KubeClient, NotFound, TransportError
from kubenode.kubeclient.events import NORMAL, WARNING, EventRecorder, ObjectReference
from kubenode.kubeclient.informer import Backoff
from kubenode.kubeclient.timefmt import rfc3339

if TYPE_CHECKING:
    from agent.container.podview import PodView
    from agent.prober.manager import ProbeManager


class _Finished(Protocol):
    def is_finished(self, uid: str) -> bool: ...


class _Views(Protocol):
    def record_uids(self) -> set[str]: ...

    def pod_views(self, uids: Iterable[str]) -> dict[str, PodView]: ...


class NodePods(Protocol):
    """What the status manager reads of the node (NodeAgent is one)."""

    @property
    def prober(self) -> ProbeManager: ...

    @property
    def workers(self) -> _Finished: ...

    @property
    def views(self) -> _Views: ...


class _Histogram(Protocol):
    def observe(self, value: float) -> None: ...


class StartMetrics(Protocol):
    """The metric the status manager feeds (AgentMetrics is one)."""

    @property
    def pod_start_duration(self) -> _Histogram: ...


log = logging.getLogger(__name__)

# The waiting reasons of a CRI container whose image is not there (the kubelet's images package).
IMAGE_ERRORS = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName")

INVALID_REASON = "InvalidPodSpec"
DELETE_POLL_S = 0.05
WRITERS = 8  # status writes in flight at once (the client's connection pool holds 16)


@dataclass(frozen=True)
class StatusTarget:
    """Where a pod's status is written: the API pod itself, or a static pod's mirror."""

    namespace: str
    name: str
    uid: str


class StatusManager(BackgroundLoop):
    thread_name = "status-manager"

    def __init__(
        self,
        client: KubeClient,
        agent: NodePods,
        host_ip: str,
        *,
        recorder: EventRecorder | None = None,
        metrics: StartMetrics | None = None,
        mirror_of: Callable[[str], StatusTarget | None] = lambda uid: None,
        resync_interval: float = 10.0,
        backoff_max: float = 10.0,
        wall: Callable[[], float] = time.time,
        writers: int = WRITERS,
    ) -> None:
        super().__init__()
        self.client = client
        self.agent = agent
        self.host_ip = host_ip
        self.recorder = recorder
        self.metrics = metrics
        self.mirror_of = mirror_of
        self.resync_interval = resync_interval
        self._wall = wall
        self._backoff = Backoff(0.1, backoff_max)
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._in_flight: set[str] = (
            set()
        )  # being synced by a writer now; synced again later if dirty meanwhile
        self._failed: set[str] = set()  # tried again at _retry_at
        self._retry_at = 0.0
        self._resync_now = False
        self._killing: set[str] = set()
        self._invalid: dict[str, ApiPod] = {}
        self._computed: dict[str, dict[str, Any]] = {}
        # What was written, and to which object (a static pod's mirror may be replaced by a new one).
        self._sent: dict[str, tuple[str, dict[str, Any]]] = {}
        self._first_seen: dict[str, float] = {}
        self._started: set[str] = set()
        self._awaiting_delete: set[str] = set()
        self._deleted: set[str] = set()
        # The status version of each pod (the kubelet's: one more per SetPodStatus, here per poke), and the
        # version its last computed status reflects: a periodic resync skips the pods where they match.
        self._versions: dict[str, int] = {}
        self._computed_version: dict[str, int] = {}
        self.writes = 0
        self._pool = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="pod-status")

    # ----- the agent's side --------------------------------------------------------------------------

    def pod_synced(self, uid: str, operation: str, seconds: float | None) -> None:
        """Called by the agent after each sync (and with "killing" when termination starts)."""
        with self._lock:
            self._first_seen.setdefault(uid, self._wall())
            self._dirty.add(uid)
            self._versions[uid] = self._versions.get(uid, 0) + 1
            if operation == "killing":
                self._killing.add(uid)
        self._wake.set()

    def resync(self) -> None:
        """Look at every pod soon (e.g. mirror pods appeared: static pods have somewhere to write now)."""
        with self._lock:
            self._resync_now = True
        self._wake.set()

    def report_invalid(self, pod: ApiPod) -> None:
        with self._lock:
            self._invalid[pod.uid] = pod
            self._dirty.add(pod.uid)
        self._wake.set()

    def stop(self) -> None:
        super().stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ----- the loop ----------------------------------------------------------------------------------

    def _run(self) -> None:
        """Hand each dirty pod to a writer as soon as it is not being written already (pipelined: a slow
        write holds up only its own pod), every pod each resync_interval, failed ones after a backoff."""
        last_resync = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            timeout = self.resync_interval - (now - last_resync)
            with self._lock:
                if self._failed:
                    timeout = min(timeout, self._retry_at - now)
            if self._awaiting_delete:
                timeout = min(timeout, DELETE_POLL_S)
            self._wake.wait(max(0.0, timeout))
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                last_resync = self._dispatch(last_resync)
            except Exception:  # the pods' status must not die with this thread
                log.exception("status manager round")

    def _dispatch(self, last_resync: float) -> float:
        """Hand the pods due now to the writers; returns when the last full resync was."""
        with self._lock:
            resync = time.monotonic() - last_resync >= self.resync_interval or self._resync_now
            forced = self._resync_now
        # Only the views of the pods handed out are built: a round runs after each pod's sync (and every
        # DELETE_POLL_S while a deletion is pending), and building all views then made each round cost
        # O(pods of the node), so a node's status work grew with the square of its pods.
        records = self.agent.views.record_uids() if resync else set()
        with self._lock:
            batch = self._dirty | self._awaiting_delete
            if self._failed and time.monotonic() >= self._retry_at:
                batch |= self._failed
                self._failed = set()
            if resync:
                last_resync = time.monotonic()
                self._resync_now = False
                uids = records
                if not forced:  # the periodic one: the pods whose newest version was not computed
                    uids = {u for u in uids if self._computed_version.get(u) != self._versions.get(u, 0)}
                versioned = self._versions.keys() | self._computed_version.keys()
                for gone in versioned - records - batch:  # no record left: nothing to version
                    self._versions.pop(gone, None)
                    self._computed_version.pop(gone, None)
                # Pods computed before whose record is gone: their sync forgets them.
                batch |= uids | (self._computed.keys() - records) | set(self._invalid)
            ready = batch - self._in_flight
            self._dirty = batch & self._in_flight  # after their write in progress
            self._in_flight |= ready
        views = self.agent.views.pod_views(ready)
        for uid in sorted(ready):
            future = self._pool.submit(self._sync_logged, uid, views.get(uid))
            future.add_done_callback(functools.partial(self._written, uid))
        return last_resync

    def _written(self, uid: str, future: Future[bool]) -> None:
        ok = not future.cancelled() and future.exception() is None and future.result()
        with self._lock:
            self._in_flight.discard(uid)
            if ok:
                if not self._failed:
                    self._backoff.reset()
            else:
                if not self._failed:
                    self._retry_at = time.monotonic() + self._backoff.next()
                self._failed.add(uid)
        self._wake.set()

    def _sync_logged(self, uid: str, view: PodView | None) -> bool:
        """Sync one pod; False if it must be retried (the server was unreachable or overloaded)."""
        with self._lock:
            version = self._versions.get(uid, 0)
        try:
            self._sync(uid, view)
        except (TransportError, ApiError) as exc:
            log.warning("pod status of %s: %s", uid, exc)
            if isinstance(exc, TransportError) or exc.code == 429 or exc.code >= 500:
                return False
        except Exception:
            log.exception("pod status of %s", uid)
            return True  # not marked computed: the next resync tries it again
        with self._lock:
            self._computed_version[uid] = version
        return True

    def _sync(self, uid: str, view: PodView | None) -> None:
        invalid = self._invalid.get(uid)
        if invalid is not None:
            self._sync_invalid(invalid)
            return
        if view is None or view.pod is None:
            self._forget(uid)
            return
        pod, record = view.pod, view.record
        previous = self._computed.get(uid)
        status = api_pod_status(
            pod,
            record,
            self.host_ip,
            previous=previous,
            start_time=rfc3339(self._first_seen.get(uid, self._wall())),
            probes=self.agent.prober.status,
        )
        self._events(view, previous, status)
        self._computed[uid] = status
        if status["phase"] == "Running" and uid not in self._started:
            self._started.add(uid)
            if self.metrics is not None and uid in self._first_seen:
                self.metrics.pod_start_duration.observe(max(0.0, self._wall() - self._first_seen[uid]))
        target = self._target(view)
        if target is not None and (target.uid, status) != self._sent.get(uid):
            self._write(uid, target, status)
        if pod.source == API_SOURCE and pod.deletion_timestamp is not None:
            self._maybe_delete(uid, view)

    def _target(self, view: PodView) -> StatusTarget | None:
        pod = view.pod
        assert pod is not None
        if pod.source == API_SOURCE:
            return StatusTarget(pod.namespace, pod.name, pod.uid)
        return self.mirror_of(pod.uid)

    def _write(self, uid: str, target: StatusTarget, status: dict[str, Any]) -> None:
        patch = {"metadata": {"uid": target.uid}, "status": status}
        try:
            self.client.patch(PODS, target.name, patch, target.namespace, subresource="status")
        except (NotFound, Conflict) as exc:
            log.info("pod %s/%s: status not written: %s", target.namespace, target.name, exc)
        self._sent[uid] = (target.uid, status)
        self.writes += 1

    def _maybe_delete(self, uid: str, view: PodView) -> None:
        pod = view.pod
        assert pod is not None
        if uid in self._deleted:
            return
        # A pod refused at admission, or still waiting for its device plugin, never ran: nothing to stop.
        never_ran = view.worker in ("rejected", "waiting")
        if not never_ran and not self.agent.workers.is_finished(uid):
            self._awaiting_delete.add(uid)
            return
        try:
            self.client.delete(PODS, pod.name, pod.namespace, grace_period_seconds=0, uid=uid)
            log.info("pod %s (%s) stopped and deleted", pod.key, uid)
        except (NotFound, Conflict):
            pass  # already gone, or a new pod of that name
        self._awaiting_delete.discard(uid)
        self._deleted.add(uid)

    def _forget(self, uid: str) -> None:
        for table in (self._computed, self._sent, self._first_seen):
            table.pop(uid, None)
        self._started.discard(uid)
        self._awaiting_delete.discard(uid)
        self._deleted.discard(uid)
        with self._lock:
            self._killing.discard(uid)

    def _sync_invalid(self, item: ApiPod) -> None:
        if item.uid in self._sent or item.error is None:
            return
        meta = item.raw.get("metadata") or {}
        message = f"{item.error.field}: {item.error.message}" if item.error.field else item.error.message
        self._event(
            self._ref(meta.get("namespace", ""), meta.get("name", ""), item.uid), WARNING, "Failed", message
        )
        status = rejected_status(INVALID_REASON, message, self.host_ip, rfc3339(self._wall()))
        target = StatusTarget(str(meta.get("namespace") or "default"), str(meta.get("name")), item.uid)
        self._write(item.uid, target, status)

    # ----- events ------------------------------------------------------------------------------------

    def _ref(self, namespace: str, name: str, uid: str, container: str = "") -> ObjectReference:
        field_path = f"spec.containers{{{container}}}" if container else ""
        return ObjectReference("Pod", name, namespace, uid, "v1", field_path)

    def _event(self, ref: ObjectReference, kind: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(ref, kind, reason, message)

    def _image_events(
        self, ref: ObjectReference, image: str, waiting: dict[str, Any], old: dict[str, Any]
    ) -> None:
        """The kubelet's image manager events for a CRI container (agent/kuberuntime/cri/images.py)."""
        reason = waiting.get("reason")
        if reason not in IMAGE_ERRORS or waiting == old:
            return
        if reason == "ErrImagePull":
            self._event(
                ref, WARNING, "Failed", f'Failed to pull image "{image}": {waiting.get("message", "")}'
            )
        elif reason == "ImagePullBackOff":
            self._event(ref, NORMAL, "BackOff", f'Back-off pulling image "{image}"')
        elif reason in ("ErrImageNeverPull", "InvalidImageName"):
            self._event(ref, WARNING, reason, str(waiting.get("message", "")))
        self._event(ref, WARNING, "Failed", f"Error: {reason}")

    def _events(self, view: PodView, previous: dict[str, Any] | None, status: dict[str, Any]) -> None:
        pod = view.pod
        assert pod is not None
        record = view.record
        failed_now = status["phase"] == "Failed" and status.get("reason")
        was = previous or {}
        if failed_now and (was.get("reason") != status.get("reason") or was.get("phase") != "Failed"):
            # Refused at admission (OutOfcpu, UnexpectedAdmissionError, ...) or evicted: an event with that
            # reason. An evicted pod may show its reason for a sync while its phase is still Running.
            self._event(self._ref(pod.namespace, pod.name, pod.uid), WARNING, record.reason, record.message)
        before = {
            c["name"]: c
            for c in (previous or {}).get("initContainerStatuses", [])
            + (previous or {}).get("containerStatuses", [])
        }
        pod_text = f"{pod.name}_{pod.namespace}({pod.uid})"
        for c in status["initContainerStatuses"] + status["containerStatuses"]:
            name, old = c["name"], before.get(c["name"], {})
            ref = self._ref(pod.namespace, pod.name, pod.uid, name)
            state, old_state = c["state"], old.get("state", {})
            # A container a restarted agent adopted was started by an earlier agent: no Created/Started again.
            # The runtime knows which processes it took over; clocks (startedAt has one-second resolution)
            # cannot tell an adopted container from one started in the agent's first second.
            container = record.containers.get(name)
            adopted = container is not None and container.adopted
            if "running" in state and state["running"] != old_state.get("running") and not adopted:
                # A process is created and started in one step: the kubelet's two events, back to back.
                self._event(ref, NORMAL, "Created", f"Created container: {name}")
                self._event(ref, NORMAL, "Started", f"Started container {name}")
            waiting = state.get("waiting", {})
            old_waiting = old_state.get("waiting", {})
            if waiting.get("reason") == "CrashLoopBackOff" and (
                old_waiting.get("reason") != "CrashLoopBackOff"
                or c["restartCount"] != old.get("restartCount")
            ):
                self._event(
                    ref, WARNING, "BackOff", f"Back-off restarting failed container {name} in pod {pod_text}"
                )
            if waiting.get("reason") == "CreateContainerConfigError" and waiting != old_waiting:
                self._event(ref, WARNING, "Failed", f"Error: {waiting.get('message', '')}")
            self._image_events(ref, c.get("image", ""), waiting, old_waiting)
            terminated = state.get("terminated", {})
            if terminated.get("reason") == "StartError" and terminated != old_state.get("terminated"):
                self._event(ref, WARNING, "Failed", f"Error: {terminated.get('message', '')}")
        with self._lock:
            killing = pod.uid in self._killing
            self._killing.discard(pod.uid)
        if killing:
            for c in status["initContainerStatuses"] + status["containerStatuses"]:
                if "running" in c["state"] or "running" in before.get(c["name"], {}).get("state", {}):
                    ref = self._ref(pod.namespace, pod.name, pod.uid, c["name"])
                    self._event(ref, NORMAL, "Killing", f"Stopping container {c['name']}")
