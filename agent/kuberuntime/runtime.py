"""The process "container runtime": starts, watches, restarts and kills a pod's container processes.

`sync_containers` is the agent's computePodActions + SyncPod for processes: init containers
run one at a time to completion, in order (a restartable init container, a sidecar, only
has to be running); then every app container is started. A container that exited is
restarted according to the pod's restartPolicy (Always; OnFailure when the exit code is
not 0; Never) with the kubelet's crash-loop backoff (see `agent.util.backoff`), during which it
waits with reason CrashLoopBackOff. A process that cannot be started counts as a
container that exited with 128 and reason StartError (as containerd reports it). A
container with an image but no command is not run: kubenode pulls no images; its status
says so (reason ImageNotSupported). The pod phase follows the kubelet's getPhase.

The processes in the pod cgroup are the truth, not the record (the kubelet asks its runtime
what runs): `reconcile` runs when a saved record is restored and at the start of every sync.
Each container process is known by its container cgroup and the identity stamped at spawn (see
`agent.kuberuntime.identity`); a running one the record does not know (the agent died before saving
it, or the record was lost) is adopted, and any further copy of the same container is killed and logged, so a
container never runs twice. Because of that the record need not be written before each
start: a sync writes it once, after all its starts (a 2,000-container pod is not rewritten
2,000 times), and a sync stops starting containers as soon as termination is requested.

`kill_pod` sends SIGTERM to every process in the pod cgroup, waits for the (possibly
shrinking) grace period, at least 2 s as the kubelet's runtime does, then SIGKILLs what
is left.
"""

from __future__ import annotations

import logging
import shutil
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.cm.cdidevices import CdiResolutionError
from agent.cm.cgroups.api import CgroupError, PodCgroups
from agent.container.downwardapi import ContainerConfigError, HostInfo
from agent.container.podrecord import (
    RUNNING,
    WAITING,
    ContainerRecord,
    PodRecord,
    RecordStore,
    RecordWriteError,
    rfc3339,
)
from agent.container.resources import ContainerResources
from agent.container.runtime import PodKillTarget
from agent.container.security import SecurityPolicy
from agent.container.streaming import StreamFlags
from agent.container.usage import CgroupReading, PodUsage
from agent.container.volumes import MountedVolume
from agent.kuberuntime.adoption import adopt_containers, reconcile_containers
from agent.kuberuntime.envvars import container_argv, container_env
from agent.kuberuntime.identity import Identity
from agent.kuberuntime.isolation import Isolation, container_isolation, namespace_plan
from agent.kuberuntime.pleg import ContainerEventStream, ProcessTable, mark_exited, relist_containers
from agent.kuberuntime.processes import (
    HOST_LAUNCHER,
    Launcher,
    ProcessStartError,
    kill_session,
    signal_session,
)
from agent.kuberuntime.securitycontext import process_security
from agent.kuberuntime.sequence import ContainerSequence, pod_phase
from agent.stats.usage import process_pod_usage
from agent.util.backoff import CrashLoopBackoff
from agent.util.configobjects import NO_OBJECTS, ConfigObjects
from kubenode.model import Container, Pod

log = logging.getLogger(__name__)

MIN_KILL_GRACE_S = 2  # the kubelet runtime's minimumGracePeriodInSeconds
START_ERROR_EXIT_CODE = 128
CONFIG_ERROR_RETRY_S = 10.0
NAME_MAX = 255  # bytes in one path component on Linux


@dataclass(frozen=True)
class _Where:
    """Where a pod's containers start: its cgroup's procs files and its volumes on the host."""

    procs_files: Sequence[str]
    volumes: Mapping[str, MountedVolume]


class ProcessRuntime:
    def __init__(
        self,
        state_dir: Path,
        store: RecordStore,
        host: HostInfo,
        *,
        backoff: CrashLoopBackoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        pre_start: Callable[[str, str], None] | None = None,
        cgroup_pids: Callable[[str], set[int]] | None = None,
        security: SecurityPolicy | None = None,
        container_cgroups: PodCgroups | None = None,
        objects: ConfigObjects = NO_OBJECTS,
        launcher: Launcher = HOST_LAUNCHER,
        cdi: Callable[[ContainerResources], ContainerResources] | None = None,
    ) -> None:
        self.launcher = launcher
        # CDI names turned into env, mounts and device nodes as each container is created
        # (agent/cm/cdidevices.py): a process pod has no runtime below it to apply them.
        self._cdi = cdi
        self.logs_dir = Path(state_dir) / "logs"
        self.stdin_dir = Path(state_dir) / "stdin"
        self.pods_dir = Path(state_dir) / "pods"
        self.objects = objects  # ConfigMaps and Secrets for env (set when the agent joins a cluster)
        # Called with (pod uid, container name) before every (re)start, as the kubelet calls the device
        # manager's PreStartContainer; it raises ContainerConfigError to hold the container back.
        self._pre_start = pre_start
        # The pids in a pod's cgroup (every hierarchy), read at the start of each sync.
        self._cgroup_pids = cgroup_pids
        # Each container's own cgroup below the pod's, with its limits and device rules (None: containers
        # run in the pod cgroup, as on a hollow node). Its OOM kill count, and its value when the container
        # started: a container that ends by SIGKILL after the count rose is reported OOMKilled (the kubelet
        # reads it from its runtime).
        self._container_cgroups = container_cgroups
        self._oom_baseline: dict[tuple[str, str], int] = {}
        self.store = store
        # What privileged containers and Localhost seccomp profiles may use (the node's securityContext side).
        self.security = security or SecurityPolicy(seccomp_root=Path(state_dir) / "seccomp")
        self.host = host
        self._clock = clock
        self.backoff = backoff if backoff is not None else CrashLoopBackoff(clock)
        self.sequence = ContainerSequence(self.backoff, clock, self._launch)
        self.processes = ProcessTable()

    # ----- watching ----------------------------------------------------------------------------

    def adopt(self, record: PodRecord, pids_in_cgroup: set[int]) -> list[str]:
        """On start: take over the pod's running container processes; returns the adopted container names.

        A container the record says runs, but whose process is gone, is marked exited (status unknown)."""
        adopted = adopt_containers(self.processes, record, pids_in_cgroup, self._clock)
        try:
            self.store.save(record)
        except RecordWriteError as exc:  # the agent must start anyway; the next sync writes again
            log.warning("pod %s: %s", record.key, exc)
        return adopted

    def reconcile(self, record: PodRecord, pids_in_cgroup: set[int], *, kill_unknown: bool) -> list[str]:
        """See adoption.reconcile_containers: one process per container, the processes in the cgroup win."""
        return reconcile_containers(
            self.processes, record, pids_in_cgroup, self._clock, kill_unknown=kill_unknown
        )

    def relist(self, record: PodRecord) -> bool:
        """Poll the pod's processes (reaping exited children); returns whether any container stopped."""
        stopped = relist_containers(self.processes, record, self._clock)
        for name in stopped:
            self._explain_sigkill(record, record.containers[name])
        if stopped:
            self.store.save(record)
        return bool(stopped)

    def _oom_count(self, uid: str, container: str) -> int | None:
        if self._container_cgroups is None:
            return None
        try:
            return self._container_cgroups.container_oom_kills(uid, container)
        except (OSError, CgroupError, ValueError):
            return None  # no pod cgroup (yet, or any more): nothing to compare

    def _explain_sigkill(self, record: PodRecord, c: ContainerRecord) -> None:
        """A container ended by SIGKILL while its cgroup's OOM kill count rose since it started was
        killed by the kernel's OOM killer: kube reports it as terminated, reason OOMKilled, exit code 137."""
        baseline = self._oom_baseline.pop((record.uid, c.name), None)
        if c.exit_code != 128 + signal.SIGKILL or c.reason != "Error" or baseline is None:
            return
        now = self._oom_count(record.uid, c.name)
        if now is not None and now > baseline:
            c.reason = "OOMKilled"

    @property
    def container_events(self) -> Callable[[], ContainerEventStream] | None:
        """How to open the runtime's container event stream (the Evented PLEG's capability), or None: host
        processes are polled by the relist; a launcher that knows when its processes start and stop (a hollow
        node's) streams their events."""
        opener: Callable[[], ContainerEventStream] | None = getattr(self.launcher, "container_events", None)
        return opener

    def has_exited(self, uid: str) -> bool:
        """Whether a process of the pod has exited since the last relist (cheap; for the agent's PLEG)."""
        return any(p.poll() is not None for p in self.processes.of_pod(uid))

    def running_pids(self, uid: str) -> set[int]:
        """The pod's live processes (an exited one may be reaped already, and its pid reused)."""
        return {p.pid for p in self.processes.of_pod(uid) if p.poll() is None}

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
        """Start or restart what should run now; returns seconds until a backoff expires (a requeue hint).

        Stops starting containers once `cancelled` is set (termination was requested). `volumes` are the
        pod's volumes, ready on the host (the volume manager's), for the containers' mount namespaces.
        A `fresh_cgroup` (made by this sync) holds no process, so its cgroup.procs files are not read."""

        for c in pod.all_containers:
            record.containers.setdefault(c.name, ContainerRecord(c.name, init=c in pod.init_containers))
        self.relist(record)
        if self._cgroup_pids is not None and not fresh_cgroup:
            self.reconcile(record, self._cgroup_pids(pod.uid), kill_unknown=True)
        hints: list[float] = []
        try:
            where = _Where(procs_files, volumes or {})
            self.sequence.start_due(pod, record, where, resources, hints, cancelled)
        finally:
            # One write for all of this sync's starts; the stamped processes are found again without it.
            record.phase = pod_phase(pod, record)
            if record.phase != "Pending" and not record.start_time:
                record.start_time = rfc3339()
            self.store.save(record)
        return min(hints) if hints else None

    def _launch(
        self,
        pod: Pod,
        c: Container,
        record: PodRecord,
        where: _Where,
        resources: ContainerResources,
        hints: list[float],
    ) -> None:
        rec = record.containers[c.name]
        if not c.command and not c.args:
            rec.state, rec.reason = WAITING, "ImageNotSupported"
            rec.message = (
                f"image {c.image!r} is not pulled: kubenode runs processes; give the container a command"
                if c.image
                else "the container has no command to run"
            )
            return
        try:
            resources = self._cdi(resources) if self._cdi is not None else resources
        except CdiResolutionError as exc:  # an unknown name, a spec that does not parse: nothing was made
            rec.state, rec.reason, rec.message = WAITING, "CreateContainerError", str(exc)
            hints.append(CONFIG_ERROR_RETRY_S)
            return
        try:
            env = container_env(pod, c, self.host, resources.envs, self.objects)
            argv = container_argv(c, env)
            security = process_security(pod, c, self.security)
            isolation = container_isolation(resources, security is not None and security.privileged)
            staging = self.pods_dir / pod.uid / "mntns" / c.name
            namespace = namespace_plan(c, where.volumes, isolation, staging)
            if self._pre_start is not None:
                self._pre_start(pod.uid, c.name)
        except ContainerConfigError as exc:
            rec.state, rec.reason, rec.message = WAITING, "CreateContainerConfigError", str(exc)
            hints.append(CONFIG_ERROR_RETRY_S)
            return
        log_path = self.log_path(pod, c.name, rec.restart_count)
        try:
            stdin = self.stdin_path(pod.uid, c.name) if wants_stdin(pod, c.name) else None
            identity = Identity.new(pod.uid, c.name)
            procs_files = self._container_cgroup(pod, c, resources, isolation) or where.procs_files
            # The baseline is read once the container's cgroup exists (it is kept across restarts, so its
            # count holds earlier kills) and before the process does: one the OOM killer ends before this
            # thread runs again (a loaded node) must find the count above it, not already in it.
            oom_baseline = self._oom_count(pod.uid, c.name)
            proc = self.launcher.spawn(
                argv, env, c.working_dir, log_path, procs_files, identity, security, namespace,
                stdin_path=stdin,
            )  # fmt: skip
        except ProcessStartError as exc:
            mark_exited(rec, START_ERROR_EXIT_CODE, "StartError", str(exc), self._clock())
            log.warning("pod %s container %s: %s", pod.key, c.name, exc)
            hints.append(0.0)  # the restart decision (and its backoff) is made on the next sync
            return
        self.processes.put(pod.uid, c.name, proc)
        if oom_baseline is not None:
            self._oom_baseline[(pod.uid, c.name)] = oom_baseline
        rec.state, rec.reason, rec.message, rec.exit_code = RUNNING, "", "", None
        rec.pid, rec.create_time = proc.pid, proc.create_time
        rec.started_at, rec.started_clock, rec.log_path = rfc3339(), self._clock(), str(log_path)
        rec.adopted = False
        log.info("pod %s container %s started (pid %d)", pod.key, c.name, proc.pid)

    def _container_cgroup(
        self, pod: Pod, c: Container, resources: ContainerResources, isolation: Isolation
    ) -> list[str]:
        """The container's own cgroup, made with its limits and device rules; its cgroup.procs files."""
        if self._container_cgroups is None:
            return []
        try:
            return self._container_cgroups.ensure_container(pod, c, resources.cpuset or None, isolation.rules)
        except (CgroupError, OSError, ValueError) as exc:
            raise ProcessStartError(f"container cgroup: {exc}") from None

    def log_path(self, pod: Pod, container: str, restart: int) -> Path:
        return self.pod_logs_dir(pod.namespace, pod.name, pod.uid) / container / f"{restart}.log"

    def pod_logs_dir(self, namespace: str, name: str, uid: str) -> Path:
        """`<ns>_<name>_<uid>` as the kubelet names pod log dirs; just the UID where that is too long."""
        directory = f"{namespace}_{name}_{uid}"
        if len(directory.encode()) > NAME_MAX:
            directory = uid  # a 253-character name would not fit in one path component
        return self.logs_dir / directory

    def remove_logs(self, namespace: str, name: str, uid: str) -> None:
        """A removed pod's logs go with it (rotated files included), as the kubelet removes its log dir."""
        shutil.rmtree(self.pod_logs_dir(namespace, name, uid), ignore_errors=True)

    def pod_usage(self, record: PodRecord, cgroup: CgroupReading) -> PodUsage:
        """The pod cgroup's numbers, shared out between the containers by their sessions (agent/stats)."""
        return process_pod_usage(record, cgroup)

    def log_reopener(self, uid: str, container: str) -> Callable[[], None] | None:
        return None  # a process keeps its descriptor: its log is rotated in place (agent/logs/rotation.py)

    def stdin_path(self, uid: str, container: str) -> Path:
        """The FIFO a `stdin: true` container reads, which `kubectl attach` writes (it outlives the agent)."""
        return self.stdin_dir / uid / container

    # ----- killing -----------------------------------------------------------------------------

    def kill_pod(
        self,
        uid: str,
        record: PodRecord | None,
        target: PodKillTarget,
        grace: Callable[[], int],
        cancelled: threading.Event | None = None,
    ) -> None:
        """SIGTERM everything in the pod cgroup, SIGKILL after the grace period; reap and record exits."""
        started = self._clock()
        target.signal_all(uid, signal.SIGTERM)
        for pid in self.running_pids(uid):
            self.launcher.signal(pid, signal.SIGTERM)
        killed = False
        kill_deadline = self._clock() + 10.0
        while True:
            if record is not None:
                self.relist(record)
            alive = target.pids(uid) | self.running_pids(uid)
            if not alive:
                break
            now = self._clock()
            if not killed and now - started >= max(grace(), MIN_KILL_GRACE_S):
                log.info("pod %s: grace period over, SIGKILL to %d processes", uid, len(alive))
                target.signal_all(uid, signal.SIGKILL)
                for pid in alive:
                    self.launcher.signal(pid, signal.SIGKILL)
                killed, kill_deadline = True, now + 10.0
            elif killed and now > kill_deadline:
                raise RuntimeError(f"pod {uid}: processes {sorted(alive)} survived SIGKILL")
            time.sleep(0.02)
        if record is not None:
            self.relist(record)
            for c in record.containers.values():
                if c.state == WAITING and c.reason in ("CrashLoopBackOff", "ContainerCreating"):
                    c.message = "pod terminated"
            self.store.save(record)
        del cancelled  # termination is never interrupted: it only gets faster

    def kill_container(self, record: PodRecord, container: str, grace: int) -> None:
        """Stop one container (a failed liveness or startup probe): SIGTERM to its process group, SIGKILL
        after the grace period (at least MIN_KILL_GRACE_S), then its exit is recorded; a later start of
        the same sync restarts it under the restart policy."""
        proc = self.processes.get(record.uid, container)
        if proc is None or proc.poll() is not None:
            self.relist(record)
            return
        signal_session(proc.pid, signal.SIGTERM)
        deadline = self._clock() + max(grace, MIN_KILL_GRACE_S)
        while proc.poll() is None and self._clock() < deadline:
            time.sleep(0.02)
        if proc.poll() is None:
            log.info("pod %s container %s: grace period over, SIGKILL", record.key, container)
            kill_session(proc.pid)
            kill_deadline = time.monotonic() + 10.0
            while proc.poll() is None and time.monotonic() < kill_deadline:
                time.sleep(0.02)
        self.relist(record)
        rec = record.containers.get(container)
        if rec is not None and rec.reason == "ContainerStatusUnknown":
            rec.reason = "Error"  # an adopted process: its code is unknown, but we know we killed it

    def forget(self, uid: str) -> None:
        self.processes.forget_pod(uid)
        for key in [k for k in self._oom_baseline if k[0] == uid]:
            del self._oom_baseline[key]
        self.backoff.forget_prefix(f"{uid}/")
        shutil.rmtree(self.stdin_dir / uid, ignore_errors=True)

    # Streams (kubectl exec, attach, port-forward): the agent serves host processes' itself (agent/server/).
    def exec_url(self, uid: str, container: str, command: Sequence[str], flags: StreamFlags) -> str | None:
        return None

    def attach_url(self, uid: str, container: str, flags: StreamFlags) -> str | None:
        return None

    def port_forward_url(self, uid: str) -> str | None:
        return None


def wants_stdin(pod: Pod, container: str) -> bool:
    """The container's `stdin: true` (read from the pod document: the model does not carry it)."""
    spec = pod.raw.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if isinstance(c, dict) and c.get("name") == container:
            return c.get("stdin") is True
    return False
