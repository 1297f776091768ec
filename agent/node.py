"""NodeAgent: the kubelet's sync loop, pod manager, admission, SyncPod, SyncTerminatingPod, SyncTerminatedPod.

Flow: sources deliver snapshots -> `_on_snapshot` diffs them into adds, updates and
removals -> adds are admitted (or rejected with phase Failed) and handed to the pod
workers as creates; removals become kills. The workers call back into `sync_pod`
(QoS, devices, QoS tiers, pod cgroup with the CPU plugin's cpuset, then the processes),
`sync_terminating_pod` (SIGTERM, grace period, SIGKILL) and `sync_terminated_pod` (pod
cgroup removed, devices freed, record dropped).

A loop thread does what the kubelet's PLEG, sync ticker and housekeeping do: it notices
exited processes (and syncs their pod), re-delivers due work (resync, backoff), and every
`housekeeping_interval` purges finished workers, starts pods wanted again, and removes
orphaned pod cgroups. On start, saved pod records are matched against the pod cgroups so
processes of pods still wanted are adopted rather than restarted; everything else found
is stopped and removed once the sources have delivered their first snapshot.

A new pod whose namespace/name is still held by a terminating pod (a manifest edited so
that its UID changed) waits until that one has finished, as the kubelet lets only one
static pod per full name run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.admission import Rejection, admit, host_allocatable
from agent.cgroups import CgroupError, PodCgroups
from agent.config import AgentConfig
from agent.cpupool import CPUPool
from agent.devicemanager import DeviceManager, DeviceManagerError, PodRef
from agent.envvars import ContainerConfigError, HostInfo
from agent.podrecord import RUNNING, TERMINATED, PodRecord, RecordStore, rfc3339
from agent.podworkers import (
    TERMINAL_PHASES,
    PodWorkers,
    SyncContext,
    SyncResult,
    UpdatePodOptions,
    UpdateType,
    WorkType,
)
from agent.runtime import ProcessRuntime
from agent.sources import ManifestError, PodSource, SourceSnapshot
from deviceplugin.cpuset import format_cpuset, parse_cpuset
from kubenode.model import Container, Pod
from kubenode.model.resources import is_extended_resource_name

log = logging.getLogger(__name__)

CPUSET_ENV = "KUBENODE_CPUSET"
QOS_UPDATE_INTERVAL_S = 60.0  # the kubelet's periodicQOSCgroupUpdateInterval
ORPHAN_GRACE_S = 1  # grace for runtime pods unknown to config, as the kubelet uses
# A loop iteration may kill an orphan (grace, then up to 10 s for SIGKILL): beyond this it is stuck.
LOOP_STALL_S = 60.0


def device_plugin_limits(container: Container) -> dict[str, int]:
    """The container's limits that the device manager allocates: positive extended
    resources only (cpu, memory, hugepages-* and kubernetes.io/ names stay the kubelet's)."""
    return {r: n for r, n in container.limits.items() if n > 0 and is_extended_resource_name(r)}


@dataclass(frozen=True)
class PodView:
    """One pod as the status endpoint shows it."""

    pod: Pod | None
    record: PodRecord
    worker: str


class NodeAgent:
    def __init__(
        self,
        config: AgentConfig,
        cgroups: PodCgroups,
        sources: Sequence[PodSource],
        *,
        devices: DeviceManager | None = None,
        clock: Callable[[], float] = time.monotonic,
        allocatable: Mapping[str, int] | None = None,
    ) -> None:
        self.config = config
        self.cgroups = cgroups
        self.devices = devices
        self.sources = list(sources)
        self._clock = clock
        self._base_allocatable = dict(allocatable or host_allocatable(config.max_pods))
        self.store = RecordStore(config.state_dir)
        self.host = HostInfo(config.node_name, allocatable=self._base_allocatable)
        self.runtime = ProcessRuntime(
            config.state_dir,
            self.store,
            self.host,
            clock=clock,
            pre_start=self._pre_start_devices,
            cgroup_pids=cgroups.pids,
        )
        self.workers = PodWorkers(self, clock=clock, resync_interval=config.resync_interval)
        self.cpu_pool = CPUPool()
        self._lock = threading.RLock()
        self._qos_lock = threading.Lock()
        self._desired: dict[str, Pod] = {}  # by UID, every source merged
        self._by_source: dict[str, set[str]] = {}
        self._rejected: dict[str, Rejection] = {}
        self._held: dict[str, Pod] = {}  # adds waiting for their full name to be free
        self._records: dict[str, PodRecord] = {}
        self._adopted: set[str] = set()  # records of the previous run: already admitted
        self._errors: dict[str, tuple[ManifestError, ...]] = {}
        self._sources_ready = False
        self._stop = threading.Event()
        self._loop_thread: threading.Thread | None = None
        self._last_qos_update = 0.0
        self._last_housekeeping = 0.0
        self.last_tick = time.monotonic()  # for the systemd watchdog: the loop is alive
        self._started_at = clock()
        # Told (uid, operation, seconds or None) after every sync, a rejection, and when a kill starts
        # ("killing"): the status manager and metrics of a node that joined a cluster.
        self.observers: list[Callable[[str, str, float | None], None]] = []

    def _observe(self, uid: str, operation: str, started: float | None = None) -> None:
        seconds = None if started is None else time.monotonic() - started
        for observer in self.observers:
            try:
                observer(uid, operation, seconds)
            except Exception:
                log.exception("pod observer failed")

    def sources_ready(self) -> bool:
        """Every source has delivered its first snapshot (a source may have a `ready` flag that says so)."""
        return self._sources_ready and all(getattr(s, "ready", True) for s in self.sources)

    # ----- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._started_at = self._clock()
        self.cgroups.start(self._base_allocatable)
        self._restore()
        for source in self.sources:
            source.start(self._on_snapshot)
        with self._lock:
            self._sources_ready = True
        if self.devices is not None:
            self.devices.retain_pods(set(self._desired) | set(self._records))
        self.housekeeping()
        self._loop_thread = threading.Thread(target=self._loop, name="agent-loop", daemon=True)
        self._loop_thread.start()

    def stop(self, *, terminate_pods: bool = False, timeout: float = 60.0) -> None:
        """Stop watching and syncing. With terminate_pods, first stop every pod and remove its cgroup."""
        for source in self.sources:
            source.stop()
        if terminate_pods:
            events = []
            with self._lock:
                pods = [self._pod_for(uid) for uid in self.workers.known_uids()]
            for pod in pods:
                if pod is not None and not self.workers.is_finished(pod.uid):
                    done = threading.Event()
                    events.append(done)
                    self.workers.update_pod(UpdatePodOptions(UpdateType.KILL, pod, completed=done))
            deadline = time.monotonic() + timeout
            for done in events:
                done.wait(max(0.0, deadline - time.monotonic()))
            for uid in list(self.workers.known_uids()):
                left = max(0.0, deadline - time.monotonic())
                self.workers.wait_for(functools.partial(self.workers.is_finished_or_gone, uid), left)
        self._stop.set()
        self.workers.queue.enqueue("", 0)  # wake the loop
        if self._loop_thread is not None:
            self._loop_thread.join(10)
        self.workers.stop()

    def _restore(self) -> None:
        records, problems = self.store.load_all()
        for problem in problems:
            log.warning("dropped unreadable pod record %s", problem)
        existing = self.cgroups.list_pods()
        for uid, record in records.items():
            pids = self.cgroups.pids(uid) if uid in existing else set()
            adopted = self.runtime.adopt(record, pids)
            if adopted:
                log.info("pod %s: adopted running containers %s", record.key, ", ".join(adopted))
            self._records[uid] = record
            self._adopted.add(uid)

    # ----- config --------------------------------------------------------------------------------

    def _on_snapshot(self, snapshot: SourceSnapshot) -> None:
        with self._lock:
            self._errors[snapshot.source] = snapshot.errors
            before = self._by_source.get(snapshot.source, set())
            now = {pod.uid: pod for pod in snapshot.pods}
            self._by_source[snapshot.source] = set(now)
            for uid in sorted(before - set(now)):
                self._remove(uid)
            for pod in sorted(snapshot.pods, key=lambda p: (p.creation_timestamp, p.key)):
                if pod.uid not in self._desired:
                    self._add(pod)
                elif pod != self._desired[pod.uid]:
                    self._update(pod)

    def _add(self, pod: Pod) -> None:
        self._desired[pod.uid] = pod
        if self._name_busy(pod):
            log.info("pod %s (%s) waits for its earlier version to terminate", pod.key, pod.uid)
            self._held[pod.uid] = pod
            return
        rejection = None if pod.uid in self._adopted else self._admission(pod)
        record = self._records.get(pod.uid) or PodRecord(pod.uid, pod.namespace, pod.name)
        record.qos = pod.qos_class.value
        self._records[pod.uid] = record
        if rejection is not None and self._plugin_may_still_come(rejection):
            # Device plugins often start after the agent: wait for a while before rejecting.
            self._held[pod.uid] = pod
            record.reason = "WaitingForDevicePlugin"
            assert self.devices is not None  # _plugin_may_still_come needs a device manager
            record.message = self.devices.why_unavailable(rejection.reason[len("OutOf") :])
            return
        record.reason = record.message = ""
        if rejection is not None:
            log.warning("pod %s rejected: %s: %s", pod.key, rejection.reason, rejection.message)
            self._rejected[pod.uid] = rejection
            record.phase, record.reason, record.message = "Failed", rejection.reason, rejection.message
            self._observe(pod.uid, "reject")
            return
        self.workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod))

    def _plugin_may_still_come(self, rejection: Rejection) -> bool:
        resource = rejection.reason[len("OutOf") :]
        # Registered is not enough: until its plugin's first device list arrives the resource counts 0.
        return (
            "/" in resource
            and self.devices is not None
            and not self.devices.wait_for_resource(resource, 0)
            and self._clock() - self._started_at < self.config.device_plugin_wait
        )

    def _update(self, pod: Pod) -> None:
        self._desired[pod.uid] = pod
        if pod.uid in self._held:
            self._held[pod.uid] = pod
        elif pod.uid not in self._rejected:
            self.workers.update_pod(UpdatePodOptions(UpdateType.UPDATE, pod))

    def _remove(self, uid: str) -> None:
        pod = self._desired.pop(uid, None)
        self._held.pop(uid, None)
        if uid in self._rejected:
            del self._rejected[uid]
            self._records.pop(uid, None)
            self.store.delete(uid)
        elif pod is not None:
            self.workers.update_pod(UpdatePodOptions(UpdateType.KILL, pod))

    def _name_busy(self, pod: Pod) -> bool:
        for uid, record in self._records.items():
            same_name = uid != pod.uid and record.key == pod.key and uid not in self._rejected
            if same_name and not self.workers.is_finished(uid) and self.workers.work_type(uid) is not None:
                return True
        return False

    def active_pods(self) -> list[Pod]:
        """Admitted pods not yet terminated (what admission and the QoS tiers count)."""
        with self._lock:
            return [
                pod
                for uid, pod in self._desired.items()
                if uid not in self._rejected
                and uid not in self._held
                and self.workers.work_type(uid) not in (WorkType.TERMINATED,)
                and self._records.get(uid, PodRecord(uid, "", "")).phase not in TERMINAL_PHASES
            ]

    def allocatable(self) -> dict[str, int]:
        result = dict(self._base_allocatable)
        if self.devices is not None:
            result.update(self.devices.allocatable())
        return result

    def _admission(self, pod: Pod) -> Rejection | None:
        others = [p for p in self.active_pods() if p.uid != pod.uid]
        return admit(pod, others, self.allocatable())

    def _pod_for(self, uid: str) -> Pod | None:
        with self._lock:
            return self._desired.get(uid) or self._held.get(uid)

    # ----- PodSyncer -----------------------------------------------------------------------------

    def _record(self, pod: Pod) -> PodRecord:
        with self._lock:
            record = self._records.get(pod.uid)
            if record is None:
                record = self._records[pod.uid] = PodRecord(pod.uid, pod.namespace, pod.name)
            return record

    def sync_pod(self, update_type: UpdateType, pod: Pod, ctx: SyncContext) -> SyncResult:
        record = self._record(pod)
        started = time.monotonic()
        try:
            result = self._sync_pod(pod, record, ctx)
        except Exception as exc:
            # Visible in status until a sync succeeds (the workers retry with backoff).
            record.reason, record.message = "SyncError", str(exc)
            raise
        finally:
            self._observe(pod.uid, update_type.name.lower(), started)
        if record.reason == "SyncError":
            record.reason = record.message = ""
        return result

    def _sync_pod(self, pod: Pod, record: PodRecord, ctx: SyncContext) -> SyncResult:
        if record.phase in TERMINAL_PHASES:
            return SyncResult(terminal=True)
        record.qos = pod.qos_class.value
        try:
            device_env, exclusive = self._allocate_devices(pod, record)
        except DeviceManagerError as exc:
            if record.containers:
                raise  # it ran before: retry (with backoff) rather than fail a running pod
            # The kubelet allocates devices at admission, and a failure there fails the pod for good.
            record.phase, record.reason = "Failed", "UnexpectedAdmissionError"
            record.message = f"Allocate failed due to {exc}, which is unexpected"
            log.warning("pod %s: %s", pod.key, record.message)
            return SyncResult(terminal=True)
        if exclusive and self.cpu_pool.assign(pod.uid, exclusive):
            self._resync_others(pod.uid)
        cpuset = format_cpuset(exclusive) if exclusive else self.cpu_pool.shared()
        if ctx.cancelled.is_set():
            return SyncResult()
        if not self.cgroups.exists(pod):
            if self.runtime.running_pids(pod.uid):
                # The pod cgroup vanished under running processes: kill them, then recreate (kubelet SyncPod).
                log.warning("pod %s: pod cgroup missing while containers run; restarting them", pod.key)
                self.runtime.kill_pod(pod.uid, record, self.cgroups, lambda: 1)
                if pod.restart_policy == "Never":
                    return SyncResult(terminal=True)
            self._update_qos([p for p in self.active_pods() if p.uid != pod.uid] + [pod])
        info = self.cgroups.ensure(pod, cpuset)
        record.cgroup, record.cpuset = info.name, cpuset or ""
        if ctx.cancelled.is_set():
            return SyncResult()
        hint = self.runtime.sync_containers(
            pod, record, self.cgroups.procs_files(pod), device_env, ctx.cancelled
        )
        if record.phase in TERMINAL_PHASES:
            return SyncResult(terminal=True)
        return SyncResult(requeue_after=hint)

    def _pre_start_devices(self, pod_uid: str, container: str) -> None:
        """PreStartContainer for the container's devices where their plugin asks for it."""
        if self.devices is None:
            return
        try:
            self.devices.pre_start(pod_uid, container)
        except DeviceManagerError as exc:
            raise ContainerConfigError(str(exc)) from None

    def _resync_others(self, uid: str) -> None:
        """The shared CPU pool changed: every other running pod gets its cpuset rewritten now."""
        for other in self.active_pods():
            if other.uid != uid:
                self.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, other))

    def _allocate_devices(self, pod: Pod, record: PodRecord) -> tuple[dict[str, dict[str, str]], set[int]]:
        """Devices for every container; returns their run envs and the pod's exclusive CPUs (may be empty)."""
        envs: dict[str, dict[str, str]] = {}
        cpus: set[int] = set()
        ref = PodRef(pod.uid, pod.namespace, pod.name)
        for c in pod.all_containers:
            wanted = device_plugin_limits(c)
            if not wanted:
                continue
            if self.devices is None:
                raise RuntimeError(
                    f"container {c.name} asks for {', '.join(wanted)} but no device manager runs"
                )
            options = self.devices.allocate(ref, c.name, wanted)
            envs[c.name] = dict(options.envs)
            record.device_specs[c.name] = [
                f"{d.host_path}:{d.container_path}:{d.permissions}" for d in options.devices
            ]
            record.mounts[c.name] = [
                f"{m.host_path}:{m.container_path}{':ro' if m.read_only else ''}" for m in options.mounts
            ]
            if CPUSET_ENV in options.envs:
                cpus |= parse_cpuset(options.envs[CPUSET_ENV])
        if self.devices is not None and envs:
            record.devices = {
                a.container: {r: list(ids) for r, ids in a.devices.items()}
                for a in self.devices.allocations()
                if a.pod.uid == pod.uid
            }
        return envs, cpus

    def sync_terminating_pod(self, pod: Pod, ctx: SyncContext) -> None:
        record = self._record(pod)
        started = time.monotonic()
        self._observe(pod.uid, "killing")
        self.runtime.kill_pod(pod.uid, record, self.cgroups, ctx.grace_period, ctx.cancelled)
        if record.phase not in TERMINAL_PHASES:
            codes = [c.exit_code for c in record.containers.values() if not c.init]
            record.phase = "Succeeded" if codes and all(code == 0 for code in codes) else "Failed"
        self.store.save(record)
        self._observe(pod.uid, "kill", started)

    def sync_terminated_pod(self, pod: Pod, ctx: SyncContext) -> None:
        self.cgroups.destroy(pod.uid)
        if self.devices is not None:
            self.devices.free_pod(pod.uid)
        if self.cpu_pool.release(pod.uid):
            self._resync_others(pod.uid)
        self.runtime.forget(pod.uid)
        with self._lock:
            wanted = pod.uid in self._desired
            if not wanted:
                self._records.pop(pod.uid, None)
                self._adopted.discard(pod.uid)
        if wanted:
            self.store.save(self._record(pod))
        else:
            self.store.delete(pod.uid)
        self._update_qos(self.active_pods())
        log.info("pod %s (%s) terminated and cleaned up", pod.key, pod.uid)
        self.workers.queue.enqueue("", 0)  # housekeeping can release held pods now
        self._observe(pod.uid, "terminated")

    # ----- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # the loop must survive anything one pod does
                log.exception("agent loop iteration failed")
            self.last_tick = time.monotonic()
            self.workers.queue.wait(self.config.relist_interval)

    def _tick(self) -> None:
        self.relist()
        self.workers.requeue_due()
        now = self._clock()
        if now - self._last_housekeeping >= self.config.housekeeping_interval or self._held:
            self._last_housekeeping = now
            self.housekeeping()

    def relist(self) -> None:
        """PLEG: a pod whose process exited gets a sync."""
        with self._lock:
            pods = [(uid, pod) for uid, pod in self._desired.items() if uid not in self._rejected]
        for uid, pod in pods:
            if self.runtime.has_exited(uid):
                self.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod))

    def housekeeping(self) -> None:
        with self._lock:
            if not self.sources_ready():
                return
        # Listed before the workers are asked what they know (as the kubelet's HandlePodCleanups does):
        # a pod added meanwhile gets its worker before its cgroup, so it is never taken for an orphan.
        pod_cgroups = set(self.cgroups.list_pods())
        with self._lock:
            admitted = [
                p for uid, p in self._desired.items() if uid not in self._rejected and uid not in self._held
            ]
            # Still under the agent's lock (order agent -> workers): a pod a source adds meanwhile
            # would reach the workers without being in `admitted`, be taken for an orphan and killed.
            self.workers.sync_known_pods(admitted)
        with self._lock:
            for uid in list(self._held):
                pod = self._held[uid]
                if not self._name_busy(pod):
                    del self._held[uid]
                    self._desired.pop(uid, None)
                    self._add(pod)
            known = set(self.workers.known_uids())
            for pod in admitted:
                if pod.uid not in known and pod.uid in self._desired:
                    self.workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod))
            known = set(self.workers.known_uids())
            wanted = set(self._desired)
            stale_records = {uid for uid in self._records if uid not in wanted and uid not in known}
        self._cleanup_orphans(stale_records | (pod_cgroups - known - wanted))
        now = self._clock()
        if now - self._last_qos_update >= QOS_UPDATE_INTERVAL_S:
            self._last_qos_update = now
            self._update_qos(self.active_pods())

    def _update_qos(self, active: list[Pod]) -> None:
        # Serialized: workers of different pods would otherwise race on the tier files.
        with self._qos_lock:
            try:
                self.cgroups.update_qos_cgroups(active)
            except CgroupError as exc:
                log.warning("updating QoS cgroups: %s", exc)

    def _cleanup_orphans(self, orphans: Iterable[str]) -> None:
        """Stop and remove what runs for pods nobody wants (from a previous run, or removed while down)."""
        for uid in sorted(orphans):
            with self._lock:
                record = self._records.pop(uid, None)
                self._adopted.discard(uid)
            log.info("stopping orphaned pod %s", record.key if record else uid)
            try:
                self.runtime.kill_pod(uid, record, self.cgroups, lambda: ORPHAN_GRACE_S)
                self.cgroups.destroy(uid)
            except (CgroupError, RuntimeError) as exc:
                log.warning("cleaning up orphaned pod %s: %s", uid, exc)
                continue
            if self.devices is not None:
                self.devices.free_pod(uid)
            self.runtime.forget(uid)
            self.store.delete(uid)

    # ----- status ------------------------------------------------------------------------------

    def pods(self) -> list[PodView]:
        with self._lock:
            views = []
            for uid, record in self._records.items():
                work = self.workers.work_type(uid)
                worker = "rejected" if uid in self._rejected else (work.value if work else "")
                if uid in self._held:
                    worker = "waiting"
                views.append(PodView(self._desired.get(uid), record, worker))
            return sorted(views, key=lambda v: v.record.key)

    def health_problems(self) -> list[str]:
        """Why the agent is unhealthy, for /healthz and the systemd watchdog: a dead or stalled loop
        (the agent's own, or a source's watcher). Takes no lock, so it answers even when one is stuck."""
        problems = []
        thread = self._loop_thread
        if thread is not None and not self._stop.is_set():
            stalled = time.monotonic() - self.last_tick
            if not thread.is_alive():
                problems.append("agent loop is not running")
            elif stalled > LOOP_STALL_S:
                problems.append(f"agent loop stalled for {stalled:.0f} s")
        for source in self.sources:
            check = getattr(source, "problems", None)  # optional in PodSource
            if check is not None:
                problems.extend(check())
        return problems

    def manifest_errors(self) -> list[ManifestError]:
        with self._lock:
            return [e for errors in self._errors.values() for e in errors]

    def limits_of(self, uid: str) -> dict[str, str]:
        with contextlib.suppress(CgroupError, OSError):
            return self.cgroups.read_limits(uid)
        return {}

    def status_json(self) -> dict[str, Any]:
        items = [
            pod_json(view, self.limits_of(view.record.uid) if view.record.cgroup else {})
            for view in self.pods()
        ]
        return {
            "kind": "PodList",
            "apiVersion": "v1",
            "node": self.config.node_name,
            "items": items,
            "errors": [
                {"source": e.source, "field": e.field, "message": e.message} for e in self.manifest_errors()
            ],
        }

    def wait_for_phase(self, uid: str, phases: Iterable[str], timeout: float) -> bool:
        """Poll (tests, `kubenode up`) until the pod's recorded phase is one of `phases`."""
        wanted = set(phases)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                record = self._records.get(uid)
                if record is not None and record.phase in wanted:
                    return True
            time.sleep(0.02)
        return False


def _container_status(c: Any) -> dict[str, Any]:
    if c.state == RUNNING:
        state: dict[str, Any] = {"running": {"startedAt": c.started_at}}
    elif c.state == TERMINATED:
        state = {
            "terminated": {
                "exitCode": c.exit_code,
                "reason": c.reason,
                "message": c.message,
                "startedAt": c.started_at,
                "finishedAt": c.finished_at,
            }
        }
    else:
        state = {"waiting": {"reason": c.reason, "message": c.message}}
    status: dict[str, Any] = {
        "name": c.name,
        "state": state,
        "ready": c.state == RUNNING,
        "restartCount": c.restart_count,
        "image": "",
    }
    if c.last_exit_code is not None:
        status["lastState"] = {"terminated": {"exitCode": c.last_exit_code, "reason": c.last_reason}}
    if c.pid is not None:
        status["pid"] = c.pid
    if c.log_path:
        status["logPath"] = c.log_path
    return status


def pod_json(view: PodView, limits: Mapping[str, str]) -> dict[str, Any]:
    r = view.record
    # The pod's worker adds to these dicts while a sync runs: iterate (and serialise) copies, each
    # taken in one step, or this raises "dictionary changed size during iteration".
    containers = list(r.containers.values())
    status: dict[str, Any] = {
        "phase": r.phase,
        "qosClass": r.qos,
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "initContainerStatuses": [_container_status(c) for c in containers if c.init],
        "containerStatuses": [_container_status(c) for c in containers if not c.init],
    }
    for key, value in (("reason", r.reason), ("message", r.message), ("startTime", r.start_time)):
        if value:
            status[key] = value
    return {
        "metadata": {
            "name": r.name,
            "namespace": r.namespace,
            "uid": r.uid,
            "annotations": dict(view.pod.annotations) if view.pod else {},
        },
        "spec": {"nodeName": view.pod.node_name if view.pod else ""},
        "status": status,
        "kubenode": {
            "source": view.pod.source if view.pod else "",
            "worker": view.worker,
            "cgroup": r.cgroup,
            "cpuset": r.cpuset,
            "limits": dict(limits),
            "devices": dict(r.devices),
            "deviceSpecs": dict(r.device_specs),
            "mounts": dict(r.mounts),
            "restarts": r.restarts(),
            "seen": rfc3339(),
        },
    }
