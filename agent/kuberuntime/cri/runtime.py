"""`CRIRuntime`: syncPod, the PLEG's relist, adoption and termination for pods run by a CRI runtime.

syncPod (`sync_containers`), in kuberuntime's order:
  relist (the runtime's containers of the pod, by the `io.kubernetes.pod.uid` label, are the truth: exits are
  recorded, one running copy per container is kept and any other stopped and removed, a running container the
  agent does not track is adopted) -> RunPodSandbox when the pod has no ready sandbox (the pod cgroup as
  cgroup_parent, host network) -> for each container due (agent/kuberuntime/sequence.py: init containers,
  sidecars, app containers, restarts under the crash-loop backoff): PullImage under imagePullPolicy
  (cri/images.py), CreateContainer (cri/configs.py; the previous dead copy beyond the last is removed first,
  as the kubelet's container GC keeps one), StartContainer.
Termination (`kill_pod`): StopContainer with the grace period (all containers at once), a last relist for the
exit codes, then StopPodSandbox and RemovePodSandbox.
A failed call because the runtime is gone raises RuntimeError naming the endpoint: the pod's status shows it
(SyncError) and the pod workers retry; gRPC reconnects when the runtime is back.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agent.kuberuntime.backoff import CrashLoopBackoff
from agent.kuberuntime.cri import labels
from agent.kuberuntime.cri.client import CRIClient, CRIError
from agent.kuberuntime.cri.configs import container_config, pod_log_directory, sandbox_config
from agent.kuberuntime.cri.gc import ContainerGC, GCPolicy, held_pods, newest_first
from agent.kuberuntime.cri.images import IMAGE_BACKOFF_INITIAL_S, ImageError, ImagePuller
from agent.kuberuntime.cri.streaming import CRIStreaming
from agent.kuberuntime.cri.security import verify_run_as_non_root
from agent.kuberuntime.envvars import ContainerConfigError, HostInfo, container_env
from agent.kuberuntime.pleg import mark_exited
from agent.kuberuntime.processes import UNKNOWN_EXIT_CODE
from agent.kuberuntime.sequence import ContainerSequence, pod_phase
from agent.pod.podrecord import RUNNING, WAITING, PodRecord, RecordStore, RecordWriteError, rfc3339
from agent.stats.cri import CRIStats
from agent.stats.usage import CgroupReading, PodUsage
from agent.util.configobjects import NO_OBJECTS, ConfigObjects
from agent.volumemanager.manager import MountedVolume
from agent.volumemanager.namespace import MountPlanError, container_mounts
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.model import Container, Pod

log = logging.getLogger(__name__)

MIN_KILL_GRACE_S = 2
START_ERROR_EXIT_CODE = 128
CONFIG_ERROR_RETRY_S = 10.0
CONNECT_TIMEOUT_S = 2.0
PULL_FAILED_RESYNC_S = 1.0
STATE_CACHE_S = 0.1  # one ListContainers serves every pod's has_exited within one PLEG pass


def _wall(nanoseconds: int) -> str:
    return rfc3339(nanoseconds / 1e9) if nanoseconds else rfc3339()


class CRIRuntime(ContainerSequence, CRIStreaming):
    def __init__(
        self,
        endpoint: str,
        store: RecordStore,
        host: HostInfo,
        *,
        node: str,
        log_root: Path,
        backoff: CrashLoopBackoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        pre_start: Callable[[str, str], None] | None = None,
        security: Callable[[Pod, Container], cri.LinuxContainerSecurityContext] | None = None,
        objects: Callable[[], ConfigObjects] = lambda: NO_OBJECTS,
        gc_policy: GCPolicy | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.store = store
        self.host = host
        self.node = node
        self.log_root = log_root
        self._clock = clock
        self.backoff = backoff if backoff is not None else CrashLoopBackoff(clock)
        self._pre_start = pre_start
        self._security = security
        self._objects = objects  # ConfigMaps and Secrets for env, once the agent joins a cluster
        self._lock = threading.Lock()
        self._client: CRIClient | None = None
        self.images = ImagePuller(self.client, clock)
        self.stats = CRIStats(self._call, node)
        self._ids: dict[tuple[str, str], str] = {}  # (pod uid, container) -> the container id tracked
        self._sandbox_configs: dict[str, tuple[str, cri.PodSandboxConfig]] = {}
        self._states: dict[str, int] = {}
        self._states_at = -1.0
        self.gc = ContainerGC(self._remove_dead, self._remove_sandbox, gc_policy, clock=clock)

    # ----- the connection ----------------------------------------------------------------------

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

    # ----- syncing -----------------------------------------------------------------------------

    def sync_containers(
        self,
        pod: Pod,
        record: PodRecord,
        procs_files: Sequence[str],
        device_env: Mapping[str, Mapping[str, str]],
        cancelled: threading.Event | None = None,
        volumes: Mapping[str, MountedVolume] | None = None,
    ) -> float | None:
        """As the process runtime's; `volumes` (the volume manager's, on the host) become CRI mounts."""
        from agent.pod.podrecord import ContainerRecord

        for c in pod.all_containers:
            record.containers.setdefault(c.name, ContainerRecord(c.name, init=c in pod.init_containers))
        hints: list[float] = []
        try:
            self.relist(record)
            self._ensure_sandbox(pod, record)
            self._start_due(pod, record, volumes or {}, device_env, hints, cancelled)
        except CRIError as exc:
            raise self._failed(exc) from None
        finally:
            record.phase = pod_phase(pod, record)
            if record.phase != "Pending" and not record.start_time:
                record.start_time = rfc3339()
            self._save(record)
        return min(hints) if hints else None

    def _ensure_sandbox(self, pod: Pod, record: PodRecord) -> str:
        sandboxes = self._sandboxes(pod.uid)
        ready = sorted(
            (s for s in sandboxes if s.state == cri.SANDBOX_READY), key=lambda s: s.created_at, reverse=True
        )
        for extra in ready[1:]:
            log.warning("pod %s: removing extra sandbox %s", pod.key, extra.id[:12])
            self._remove_sandbox(extra.id)
        attempt = max((s.metadata.attempt + 1 for s in sandboxes), default=0)
        if ready:
            sandbox = ready[0]
            with self._lock:
                known = self._sandbox_configs.get(pod.uid)
            if known is None or known[0] != sandbox.id:
                config = sandbox_config(
                    pod, self.node, self.log_root, record.cgroup, sandbox.metadata.attempt
                )
                with self._lock:
                    self._sandbox_configs[pod.uid] = (sandbox.id, config)
            return str(sandbox.id)
        for dead in sandboxes:
            self._remove_sandbox(dead.id)
        config = sandbox_config(pod, self.node, self.log_root, record.cgroup, attempt)
        sandbox_id = str(self._call("RunPodSandbox", cri.RunPodSandboxRequest(config=config)).pod_sandbox_id)
        with self._lock:
            self._sandbox_configs[pod.uid] = (sandbox_id, config)
        log.info("pod %s: sandbox %s running", pod.key, sandbox_id[:12])
        return sandbox_id

    def _remove_sandbox(self, sandbox_id: str) -> None:
        try:
            self._call("StopPodSandbox", cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))
            self._call("RemovePodSandbox", cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))
        except CRIError as exc:
            if not exc.not_found:
                raise

    def _launch(
        self,
        pod: Pod,
        c: Container,
        record: PodRecord,
        where: Mapping[str, MountedVolume],
        device_env: Mapping[str, str],
        hints: list[float],
    ) -> None:
        rec = record.containers[c.name]
        if not c.image:
            rec.state, rec.reason, rec.message = WAITING, "InvalidImageName", "the container names no image"
            return
        try:
            image_ref = self.images.ensure(pod, c)
        except ImageError as exc:
            rec.state, rec.reason, rec.message = WAITING, exc.reason, exc.message
            # After a failed pull the next sync shows the backoff (ImagePullBackOff), as the kubelet's does.
            wait = (
                PULL_FAILED_RESYNC_S if exc.reason == "ErrImagePull" else self.images.retry_in(pod, c.image)
            )
            hints.append(wait or IMAGE_BACKOFF_INITIAL_S)
            return
        try:
            env = container_env(pod, c, self.host, device_env, self._objects())
            security = self._security(pod, c) if self._security is not None else None
            verify_run_as_non_root(pod, c, lambda: self.images.user(image_ref))
            try:
                volume_mounts = [
                    cri.Mount(host_path=m.source, container_path=m.target, readonly=m.read_only)
                    for m in container_mounts(c, where)
                ]
            except MountPlanError as exc:
                raise ContainerConfigError(str(exc)) from None
            if self._pre_start is not None:
                self._pre_start(pod.uid, c.name)
        except ContainerConfigError as exc:
            rec.state, rec.reason, rec.message = WAITING, "CreateContainerConfigError", str(exc)
            hints.append(CONFIG_ERROR_RETRY_S)
            return
        with self._lock:
            sandbox_id, sandbox = self._sandbox_configs[pod.uid]
        # Never an attempt the runtime already has (its name is reserved): a copy created by an agent killed
        # before it recorded it counts, as the kubelet numbers attempts after the newest container it finds.
        attempt = max(rec.restart_count, self._collect_dead(pod.uid, c.name))
        config = container_config(
            pod,
            c,
            env=env,
            restart_count=attempt,
            node=self.node,
            cpuset=record.cpuset,
            device_specs=record.device_specs.get(c.name, ()),
            mount_specs=record.mounts.get(c.name, ()),
            security=security,
            volume_mounts=volume_mounts,
        )
        try:
            cid = str(
                self._call(
                    "CreateContainer",
                    cri.CreateContainerRequest(
                        pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox
                    ),
                ).container_id
            )
        except CRIError as exc:
            if exc.unavailable:
                raise
            rec.state, rec.reason, rec.message = WAITING, "CreateContainerError", str(exc)
            log.warning("pod %s container %s: %s", pod.key, c.name, exc)
            hints.append(CONFIG_ERROR_RETRY_S)
            return
        try:
            self._call("StartContainer", cri.StartContainerRequest(container_id=cid))
        except CRIError as exc:
            if exc.unavailable:
                raise
            mark_exited(rec, START_ERROR_EXIT_CODE, "StartError", str(exc), self._clock())
            log.warning("pod %s container %s: %s", pod.key, c.name, exc)
            hints.append(0.0)
            return
        with self._lock:
            self._ids[(pod.uid, c.name)] = cid
        rec.state, rec.reason, rec.message, rec.exit_code = RUNNING, "", "", None
        rec.container_id, rec.image_ref = f"{self.client().runtime_name}://{cid}", image_ref
        rec.pid, rec.create_time = None, None
        rec.started_at, rec.started_clock = rfc3339(), self._clock()
        rec.log_path = str(
            pod_log_directory(self.log_root, pod.namespace, pod.name, pod.uid) / config.log_path
        )
        rec.adopted = False
        log.info("pod %s container %s started (%s)", pod.key, c.name, cid[:12])

    def _collect_dead(self, uid: str, name: str) -> int:
        """The container GC's per-container limit before a new copy (the newest dead ones stay, for
        --previous); returns the next free attempt number of the container."""
        copies = newest_first(self._containers(uid, name))
        dead = [c for c in copies if c.state != cri.CONTAINER_RUNNING]
        keep = self.gc.policy.max_per_pod_container
        for c in reversed(dead[keep:] if keep >= 0 else []):
            self._stop_and_remove(c.id, 0)
        return copies[0].metadata.attempt + 1 if copies else 0

    # ----- killing -----------------------------------------------------------------------------

    def kill_pod(
        self,
        uid: str,
        record: PodRecord | None,
        target: object,
        grace: Callable[[], int],
        cancelled: threading.Event | None = None,
    ) -> None:
        """StopContainer (all at once, within the grace period), the exits recorded, the sandbox removed."""
        del target, cancelled
        with self._lock:
            started_here = uid in self._sandbox_configs or any(k[0] == uid for k in self._ids)
        try:
            running = [c for c in self._containers(uid) if c.state == cri.CONTAINER_RUNNING]
            timeout = max(grace(), MIN_KILL_GRACE_S)
            if running:
                with ThreadPoolExecutor(max_workers=min(8, len(running))) as pool:
                    for done in [
                        pool.submit(
                            self._call,
                            "StopContainer",
                            cri.StopContainerRequest(container_id=c.id, timeout=timeout),
                            timeout + 10,
                        )
                        for c in running
                    ]:
                        done.result()
            if record is not None:
                self.relist(record)
            for sandbox in self._sandboxes(uid):
                self._remove_sandbox(sandbox.id)
                meta = sandbox.metadata
                if record is None and "/" not in meta.namespace + meta.name:
                    # An orphan known only to the runtime: its logs go too, as the kubelet's GC removes them.
                    self.remove_logs(meta.namespace, meta.name, uid)
        except CRIError as exc:
            if not (exc.unavailable and not started_here):
                raise self._failed(exc) from None
            # The runtime is away and this agent never ran anything of the pod: there is nothing to stop.
            log.warning("pod %s: not stopped in the runtime (%s); this agent started nothing of it", uid, exc)
        with self._lock:
            for key in [k for k in self._ids if k[0] == uid]:
                del self._ids[key]
            self._sandbox_configs.pop(uid, None)
        if record is not None:
            for c in record.containers.values():
                if c.state == WAITING and c.reason in ("CrashLoopBackOff", "ContainerCreating"):
                    c.message = "pod terminated"
            self._save(record)

    def pod_logs_dir(self, namespace: str, name: str, uid: str) -> Path:
        return pod_log_directory(self.log_root, namespace, name, uid)

    def remove_logs(self, namespace: str, name: str, uid: str) -> None:
        """A removed pod's log directory goes with it, as the kubelet removes it."""
        shutil.rmtree(self.pod_logs_dir(namespace, name, uid), ignore_errors=True)

    # ----- stats and logs ------------------------------------------------------------------------

    def pod_usage(self, record: PodRecord, cgroup: CgroupReading) -> PodUsage:
        """ListPodSandboxStats, or ListContainerStats and the pod cgroup (agent/stats/cri.py)."""
        with self._lock:
            ids = {name: cid for (uid, name), cid in self._ids.items() if uid == record.uid}
        try:
            return self.stats.pod_usage(record, ids, cgroup)
        except CRIError as exc:
            raise self._failed(exc) from None

    def log_reopener(self, uid: str, container: str) -> Callable[[], None] | None:
        """ReopenContainerLog for the container the runtime tracks (the log manager renamed its log)."""
        with self._lock:
            cid = self._ids.get((uid, container))
        if cid is None:
            return None

        def reopen() -> None:
            try:
                self._call("ReopenContainerLog", cri.ReopenContainerLogRequest(container_id=cid))
            except CRIError as exc:
                raise self._failed(exc) from None

        return reopen

    def forget(self, uid: str) -> None:
        with self._lock:
            for key in [k for k in self._ids if k[0] == uid]:
                del self._ids[key]
            self._sandbox_configs.pop(uid, None)
        self.backoff.forget_prefix(f"{uid}/")
        self.images.forget(uid)

    def kill_container(self, record: PodRecord, container: str, grace: int) -> None:
        """Stop one container (a failed liveness or startup probe) with its grace; its exit is recorded and a
        later start of the same sync restarts it under the restart policy."""
        with self._lock:
            cid = self._ids.get((record.uid, container))
        if cid is None:
            return
        try:
            timeout = max(grace, MIN_KILL_GRACE_S)
            self._call(
                "StopContainer", cri.StopContainerRequest(container_id=cid, timeout=timeout), timeout + 10
            )
            self.relist(record)
        except CRIError as exc:
            raise self._failed(exc) from None

    def exec_sync(
        self, uid: str, container: str, command: Sequence[str], timeout: float
    ) -> tuple[int, bytes, bytes]:
        """ExecSync in the pod's running container (exec probes): exit code, stdout, stderr.

        Raises LookupError when the container is not running, RuntimeError when the runtime fails."""
        try:
            found = [c for c in self._containers(uid, container) if c.state == cri.CONTAINER_RUNNING]
            if not found:
                raise LookupError(f"container {container} of pod {uid} is not running")
            # ExecSync's timeout is whole seconds; 0 would mean none. The call's deadline allows for it.
            seconds = max(1, int(timeout + 0.999))
            answer = self._call(
                "ExecSync",
                cri.ExecSyncRequest(container_id=found[0].id, cmd=list(command), timeout=seconds),
                seconds + 10,
            )
        except CRIError as exc:
            raise self._failed(exc) from None
        return int(answer.exit_code), bytes(answer.stdout), bytes(answer.stderr)

    def node_images(self) -> list[dict[str, Any]]:
        """status.images as the kubelet reports them: names (tags, then digests) and sizes."""
        listed = self._call_images("ListImages", cri.ListImagesRequest())
        return [
            {"names": [*image.repo_tags, *image.repo_digests], "sizeBytes": int(image.size)}
            for image in listed.images
        ]

    def _call_images(self, method: str, request: Any) -> Any:
        client = self.client()
        return client.call(getattr(client.images, method), request)
