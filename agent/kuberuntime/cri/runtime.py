"""`CRIRuntime`: syncPod and termination for pods run by a CRI runtime (the connection, the PLEG's relist and
adoption are cri/relist.py's `CRIRelist`, which it extends).

syncPod (`sync_containers`), in kuberuntime's order:
  relist (the runtime's containers of the pod, by the `io.kubernetes.pod.uid` label, are the truth: exits are
  recorded, one running copy per container is kept and any other stopped and removed, a running container the
  agent does not track is adopted) -> RunPodSandbox when the pod has no ready sandbox (the pod cgroup as
  cgroup_parent, host network) -> for each container due (agent/kuberuntime/sequence.py: init containers,
  sidecars, app containers, restarts under the crash-loop backoff): PullImage under imagePullPolicy
  (cri/images.py), CreateContainer (cri/configs.py; the previous dead copy beyond the last is removed first,
  as the kubelet's container GC keeps one), StartContainer. A container's CDI names go to the runtime as
  CDIDevices where it applies CDI (cri/cdisupport.py); otherwise the agent resolves them first
  (agent/cm/cdidevices.py) into env, devices and mounts, and an unresolvable one is CreateContainerError.
Termination (`kill_pod`): StopContainer with the grace period (all containers at once), a last relist for the
exit codes, then StopPodSandbox and RemovePodSandbox.
A failed call because the runtime is gone raises RuntimeError naming the endpoint: the pod's status shows it
(SyncError) and the pod workers retry; gRPC reconnects when the runtime is back.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agent.cm.cdidevices import CdiResolutionError
from agent.container.downwardapi import ContainerConfigError, HostInfo
from agent.container.podrecord import RUNNING, WAITING, PodRecord, RecordStore, rfc3339
from agent.container.resources import ContainerResources
from agent.container.usage import CgroupReading, PodUsage
from agent.container.volumes import MountedVolume
from agent.kuberuntime.cri.cdisupport import CdiForRuntime
from agent.kuberuntime.cri.client import CRIClient, CRIError
from agent.kuberuntime.cri.configs import container_config, pod_log_directory, sandbox_config
from agent.kuberuntime.cri.gc import ContainerGC, GCPolicy, newest_first
from agent.kuberuntime.cri.images import IMAGE_BACKOFF_INITIAL_S, ImageError, ImagePuller
from agent.kuberuntime.cri.relist import CRIRelist
from agent.kuberuntime.cri.security import verify_run_as_non_root
from agent.kuberuntime.cri.streaming import CRIStreaming
from agent.kuberuntime.envvars import container_env
from agent.kuberuntime.pleg import mark_exited
from agent.kuberuntime.sequence import ContainerSequence, pod_phase
from agent.stats.cri import CRIStats
from agent.util.backoff import CrashLoopBackoff
from agent.util.configobjects import NO_OBJECTS, ConfigObjects
from agent.volumemanager.namespace import MountPlanError, container_mounts
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.model import Container, Pod

log = logging.getLogger(__name__)

MIN_KILL_GRACE_S = 2
START_ERROR_EXIT_CODE = 128
CONFIG_ERROR_RETRY_S = 10.0
PULL_FAILED_RESYNC_S = 1.0


class CRIRuntime(CRIRelist, CRIStreaming):
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
        cdi: Callable[[ContainerResources], ContainerResources] | None = None,
        cdi_setting: str = "auto",
    ) -> None:
        self.endpoint = endpoint
        self.store = store
        self.host = host
        self.node = node
        self.log_root = log_root
        self._clock = clock
        self.backoff = backoff if backoff is not None else CrashLoopBackoff(clock)
        self.sequence = ContainerSequence(self.backoff, clock, self._launch)
        self._pre_start = pre_start
        self._security = security
        self._objects = objects  # ConfigMaps and Secrets for env, once the agent joins a cluster
        # CDI names kept for a runtime that applies them, resolved by the agent for one that does not.
        self._cdi = CdiForRuntime(cdi, cdi_setting, self.version, self._call)
        self._lock = threading.Lock()
        self._client: CRIClient | None = None
        self.images = ImagePuller(self.client, clock)
        self.stats = CRIStats(self._call, node)
        self._ids: dict[tuple[str, str], str] = {}  # (pod uid, container) -> the container id tracked
        self._sandbox_configs: dict[str, tuple[str, cri.PodSandboxConfig]] = {}
        self._states: dict[str, int] = {}
        self._states_at = -1.0
        self.gc = ContainerGC(self._remove_dead, self._remove_sandbox, gc_policy, clock=clock)

    # ----- syncing -----------------------------------------------------------------------------

    def sync_containers(
        self,
        pod: Pod,
        record: PodRecord,
        procs_files: Sequence[str],
        resources: Mapping[str, ContainerResources],
        cancelled: threading.Event | None = None,
        volumes: Mapping[str, MountedVolume] | None = None,
        *,
        fresh_cgroup: bool = False,
    ) -> float | None:
        """As the process runtime's; `volumes` (the volume manager's, on the host) become CRI mounts.
        `fresh_cgroup` changes nothing here: the runtime, not the agent, puts containers in cgroups."""
        from agent.container.podrecord import ContainerRecord

        for c in pod.all_containers:
            record.containers.setdefault(c.name, ContainerRecord(c.name, init=c in pod.init_containers))
        hints: list[float] = []
        try:
            self.relist(record)
            self._ensure_sandbox(pod, record)
            self.sequence.start_due(pod, record, volumes or {}, resources, hints, cancelled)
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

    def _launch(
        self,
        pod: Pod,
        c: Container,
        record: PodRecord,
        where: Mapping[str, MountedVolume],
        resources: ContainerResources,
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
            resources = self._cdi.prepare(resources)
        except CdiResolutionError as exc:
            rec.state, rec.reason, rec.message = WAITING, "CreateContainerError", str(exc)
            log.warning("pod %s container %s: %s", pod.key, c.name, exc)
            hints.append(CONFIG_ERROR_RETRY_S)
            return
        try:
            env = container_env(pod, c, self.host, resources.envs, self._objects())
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
            resources=resources,
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
        --previous); returns the next free attempt number of the container.

        A copy created but never started (its agent was killed, or its CreateContainer timed out but took
        effect) goes first: it never ran, and its attempt is free again, so the attempt stays the restart
        count and `<restart>.log` stays the log layout --previous reads."""
        copies = []
        for c in newest_first(self._containers(uid, name)):
            if c.state == cri.CONTAINER_CREATED:
                self._stop_and_remove(c.id, 0)
            else:
                copies.append(c)
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
