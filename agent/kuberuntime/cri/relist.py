"""`CRIRelist`: the CRI runtime's connection, the PLEG's relist, adoption, and what housekeeping asks of it.

`CRIRuntime` (cri/runtime.py) is syncPod and termination on top of this. The runtime's containers of a pod (by
its `io.kubernetes.pod.uid` label and the agent's `kubenode.io/node` label) are the truth:
- `relist` (every sync, and the PLEG's `has_exited` from one ListContainers per pass): exits are recorded from
  ContainerStatus, also of a container the record never saw start (an agent killed between StartContainer
  and its record); one running copy per container is kept and any other stopped and removed; a running
  container the agent does not track is adopted;
- `adopt` (a restarted agent, per saved record): the same, and a recorded container that ended while no
  agent watched gets its exit from the runtime, one that is gone is ContainerStatusUnknown;
- `held_pods` (housekeeping): every pod with a sandbox or container of this node, so that the orphans of a
  killed agent are found without record or cgroup; the same listing runs the container GC (cri/gc.py).
A failed call because the runtime is gone becomes RuntimeError naming the endpoint (`_failed`); the client
connects again, and re-checks the API version, on the next call.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from agent.container.podrecord import RUNNING, WAITING, PodRecord, RecordStore, RecordWriteError, rfc3339
from agent.kuberuntime.cri import labels
from agent.kuberuntime.cri.client import CRIClient, CRIError
from agent.kuberuntime.cri.gc import ContainerGC, held_pods, newest_first
from agent.kuberuntime.pleg import mark_exited
from agent.kuberuntime.processes import UNKNOWN_EXIT_CODE
from kubenode.api.cri.v1 import api_pb2 as cri

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 2.0
STATE_CACHE_S = 0.1  # one ListContainers serves every pod's has_exited within one PLEG pass


def _wall(nanoseconds: int) -> str:
    return rfc3339(nanoseconds / 1e9) if nanoseconds else rfc3339()


class CRIRelist:
    # Set by CRIRuntime.__init__.
    endpoint: str
    store: RecordStore
    node: str
    gc: ContainerGC
    _clock: Callable[[], float]
    _lock: threading.Lock
    _client: CRIClient | None
    _ids: dict[tuple[str, str], str]  # (pod uid, container) -> the container id tracked
    _sandbox_configs: dict[str, tuple[str, cri.PodSandboxConfig]]
    _states: dict[str, int]
    _states_at: float

    def client(self) -> CRIClient:
        """The connected client; connects (and checks the API version) on first use and after a failure."""
        with self._lock:
            if self._client is None:
                self._client = CRIClient.connect(self.endpoint, CONNECT_TIMEOUT_S)
            return self._client

    def version(self) -> cri.VersionResponse:
        return self.client().version()

    def _call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        client = self.client()
        target = getattr(client.runtime, method)
        return client.call(target, request) if timeout is None else client.call(target, request, timeout)

    def _containers(self, uid: str, name: str | None = None) -> list[cri.Container]:
        selector = {labels.POD_UID: uid, labels.NODE: self.node}
        if name is not None:
            selector[labels.CONTAINER_NAME] = name
        found = self._call(
            "ListContainers", cri.ListContainersRequest(filter=cri.ContainerFilter(label_selector=selector))
        )
        return list(found.containers)

    def _sandboxes(self, uid: str) -> list[cri.PodSandbox]:
        selector = {labels.POD_UID: uid, labels.NODE: self.node}
        found = self._call(
            "ListPodSandbox", cri.ListPodSandboxRequest(filter=cri.PodSandboxFilter(label_selector=selector))
        )
        return list(found.items)

    def _failed(self, exc: CRIError) -> RuntimeError:
        if exc.unavailable:
            with self._lock:
                self._client = None  # connect again (and re-check the version) next time
        return RuntimeError(f"container runtime {self.endpoint}: {exc}")

    # ----- the PLEG ----------------------------------------------------------------------------

    def owns(self, uid: str) -> bool:
        """Whether the runtime has a sandbox or container of the pod (a restarted agent asks this)."""
        with self._lock:
            if uid in self._sandbox_configs or any(k[0] == uid for k in self._ids):
                return True
        try:
            return bool(self._sandboxes(uid) or self._containers(uid))
        except (CRIError, RuntimeError):
            return False

    def held_pods(self) -> set[str]:
        """Every pod with a sandbox or container of this node in the runtime (housekeeping's orphan
        search); the same listing runs the container GC when it is due (cri/gc.py). RuntimeError if the
        runtime fails."""
        mine = {labels.NODE: self.node}
        try:
            sandboxes = self._call(
                "ListPodSandbox", cri.ListPodSandboxRequest(filter=cri.PodSandboxFilter(label_selector=mine))
            ).items
            containers = self._call(
                "ListContainers", cri.ListContainersRequest(filter=cri.ContainerFilter(label_selector=mine))
            ).containers
            if self.gc.due():
                self.gc.collect(containers, sandboxes)
        except CRIError as exc:
            raise self._failed(exc) from None
        return held_pods(sandboxes, containers)

    def has_exited(self, uid: str) -> bool:
        with self._lock:
            tracked = [cid for (u, _), cid in self._ids.items() if u == uid]
        if not tracked:
            return False
        now = self._clock()
        if now - self._states_at > STATE_CACHE_S:
            try:
                listed = self._call(
                    "ListContainers",
                    cri.ListContainersRequest(
                        filter=cri.ContainerFilter(label_selector={labels.NODE: self.node})
                    ),
                )
            except CRIError:
                return False  # the sync says why; the PLEG just waits
            self._states = {c.id: c.state for c in listed.containers}
            self._states_at = now
        return any(self._states.get(cid) != cri.CONTAINER_RUNNING for cid in tracked)

    def running_pids(self, uid: str) -> set[int]:
        return set()  # CRI containers are the runtime's to signal, never the agent's

    def relist(self, record: PodRecord) -> bool:
        """Record exits, keep one running copy per container, adopt untracked ones; True if any stopped."""
        listed = self._containers(record.uid)
        by_id = {c.id: c for c in listed}
        stopped = []
        for rec in record.containers.values():
            if rec.state != RUNNING:
                continue
            with self._lock:
                cid = self._ids.get((record.uid, rec.name))
            if cid is None:
                continue  # adopted below if it still runs
            found = by_id.get(cid)
            if found is not None and found.state == cri.CONTAINER_RUNNING:
                continue
            self._record_exit(record, rec.name, cid, found)
            stopped.append(rec.name)
        stopped += self._exits_unrecorded(record, listed)
        self._reconcile(record, listed)
        if stopped:
            self._save(record)
        return bool(stopped)

    def _exits_unrecorded(self, record: PodRecord, listed: Sequence[cri.Container]) -> list[str]:
        """A container the record never saw start but the runtime ran to its end (an agent was killed between
        StartContainer and its record): its exit is recorded from the runtime, as the kubelet reads a pod's
        status from the runtime, so that a completed init container does not run again."""
        found = []
        for rec in record.containers.values():
            if rec.state != WAITING or rec.container_id:
                continue
            exited = newest_first(
                c
                for c in listed
                if c.labels.get(labels.CONTAINER_NAME) == rec.name and c.state == cri.CONTAINER_EXITED
            )
            if exited:
                self._record_exit(record, rec.name, exited[0].id, exited[0])
                rec.container_id = f"{self.client().runtime_name}://{exited[0].id}"
                log.info(
                    "pod %s container %s: recorded the exit of %s (%s, %s)",
                    record.key,
                    rec.name,
                    exited[0].id[:12],
                    rec.exit_code,
                    rec.reason,
                )
                found.append(rec.name)
        return found

    def _record_exit(self, record: PodRecord, name: str, cid: str, found: cri.Container | None) -> None:
        rec = record.containers[name]
        with self._lock:
            self._ids.pop((record.uid, name), None)
        if found is None:
            mark_exited(
                rec, UNKNOWN_EXIT_CODE, "ContainerStatusUnknown", "the runtime lost it", self._clock()
            )
            return
        status = self._call("ContainerStatus", cri.ContainerStatusRequest(container_id=cid)).status
        reason = status.reason or ("Completed" if status.exit_code == 0 else "Error")
        mark_exited(rec, status.exit_code, reason, status.message, self._clock())
        rec.finished_at = _wall(status.finished_at)

    def _reconcile(self, record: PodRecord, listed: Sequence[cri.Container]) -> list[str]:
        running: dict[str, list[cri.Container]] = {}
        for c in listed:
            if c.state == cri.CONTAINER_RUNNING:
                running.setdefault(c.labels.get(labels.CONTAINER_NAME, ""), []).append(c)
        adopted = []
        for name, copies in running.items():
            rec = record.containers.get(name)
            with self._lock:
                tracked = self._ids.get((record.uid, name))
            keep = next((c for c in copies if c.id == tracked), None)
            if keep is None and rec is not None:
                keep = max(copies, key=lambda c: (c.metadata.attempt, c.created_at))
            for c in copies:
                if keep is None or c.id != keep.id:
                    log.warning("pod %s container %s: removing extra copy %s", record.key, name, c.id[:12])
                    self._stop_and_remove(c.id, 0)
            if keep is not None and rec is not None and keep.id != tracked:
                with self._lock:
                    self._ids[(record.uid, name)] = keep.id
                rec.state, rec.reason, rec.message, rec.exit_code = RUNNING, "", "", None
                rec.started_clock, rec.adopted = self._clock(), True
                rec.container_id = f"{self.client().runtime_name}://{keep.id}"
                rec.image_ref = keep.image_ref
                rec.started_at = rec.started_at or _wall(keep.created_at)
                log.info("pod %s container %s: adopted running container %s", record.key, name, keep.id[:12])
                adopted.append(name)
        return adopted

    def _remove_dead(self, c: cri.Container) -> None:
        """The container GC's removal: RemoveContainer only, after a stop for a container in unknown state."""
        if c.state == cri.CONTAINER_UNKNOWN:
            self._stop_and_remove(c.id, 0)
            return
        try:
            self._call("RemoveContainer", cri.RemoveContainerRequest(container_id=c.id))
        except CRIError as exc:
            if not exc.not_found:
                raise

    def _stop_and_remove(self, cid: str, timeout: int) -> None:
        try:
            self._call(
                "StopContainer", cri.StopContainerRequest(container_id=cid, timeout=timeout), timeout + 10
            )
            self._call("RemoveContainer", cri.RemoveContainerRequest(container_id=cid))
        except CRIError as exc:
            if not exc.not_found:
                raise

    def adopt(self, record: PodRecord, pids_in_cgroup: set[int]) -> list[str]:
        """On agent start: take over the pod's running containers; a recorded one that ended meanwhile gets
        its exit from the runtime, one that is gone says so."""
        del pids_in_cgroup
        try:
            listed = self._containers(record.uid)
            adopted = self._reconcile(record, listed)
        except CRIError as exc:
            log.warning("pod %s: cannot list its containers: %s", record.key, exc)
            return []
        by_id = {c.id: c for c in listed}
        for rec in record.containers.values():
            if rec.state == RUNNING and rec.name not in adopted:
                with self._lock:
                    known = (record.uid, rec.name) in self._ids
                ended = by_id.get(rec.container_id.partition("://")[2])
                if not known and ended is not None:
                    with contextlib.suppress(CRIError):  # unknown below, as if it were gone
                        self._record_exit(record, rec.name, ended.id, ended)
                if not known and rec.state == RUNNING:
                    mark_exited(
                        rec, UNKNOWN_EXIT_CODE, "ContainerStatusUnknown", "gone while the agent was down", 0.0
                    )
        self._save(record)
        return adopted

    def _save(self, record: PodRecord) -> None:
        try:
            self.store.save(record)
        except RecordWriteError as exc:
            log.warning("pod %s: %s", record.key, exc)

    def _remove_sandbox(self, sandbox_id: str) -> None:
        try:
            self._call("StopPodSandbox", cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))
            self._call("RemovePodSandbox", cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))
        except CRIError as exc:
            if not exc.not_found:
                raise
