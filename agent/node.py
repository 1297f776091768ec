"""NodeAgent: the kubelet's sync loop, pod manager, admission, SyncPod, SyncTerminatingPod, SyncTerminatedPod.

Flow: sources deliver snapshots -> `_on_snapshot` diffs them into adds, updates and
removals -> adds are admitted (or rejected with phase Failed) and handed to the pod
workers as creates; removals become kills (the pod manager and admission:
agent/pod/podmanager.py). The workers call back into `sync_pod` (QoS, devices, QoS tiers, pod
cgroup with the CPU plugin's cpuset, then the processes), `sync_terminating_pod` (SIGTERM,
grace period, SIGKILL) and `sync_terminated_pod` (pod cgroup removed, devices freed, record
dropped): agent/podworkers/podsync.py. NodeAgent, here, owns their state, the lifecycle, the loop and
the status; its public API is the same whichever module a method lives in.

A loop thread does what the kubelet's PLEG, sync ticker and housekeeping do: it notices
exited processes (and syncs their pod), re-delivers due work (resync, backoff), and every
`housekeeping_interval` purges finished workers, starts pods wanted again, and removes
orphaned pod cgroups (with a CRI runtime, also the pods it holds sandboxes of that no one wants).
The relist runs every `relist_interval` (the generic PLEG); with a runtime that streams its container
events (a hollow node's), the Evented PLEG's thread syncs a pod as its container stops, and the relist
runs every 300 s as a safety net, back at `relist_interval` once the stream has failed for good
(agent/kuberuntime/pleg/). The loop sleeps until its next relist, housekeeping or due work.
On start, saved pod records are matched against the pod cgroups so
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.apis.config import AgentConfig
from agent.cm.cgroups import CgroupError
from agent.cm.containermanager import ContainerManager
from agent.config.sources import ManifestError, PodSource
from agent.container.downwardapi import HostInfo
from agent.container.execresult import ExecRunner
from agent.container.podrecord import RUNNING, TERMINATED, PodRecord, RecordStore, RecordWriteError, rfc3339
from agent.container.podview import PodView
from agent.container.runtime import PodRuntime
from agent.eviction.manager import EvictionManager, PodUsage
from agent.eviction.podusage import pod_usage, reclaim_dead_logs
from agent.eviction.signals import Observation, observe
from agent.eviction.thresholds import parse_thresholds
from agent.kuberuntime.pleg import CONTAINER_STOPPED, EVENTED_RELIST_PERIOD_S, ContainerEvent, EventedPLEG
from agent.lifecycle.admission import Rejection
from agent.logs.manager import ContainerLogManager, LiveLog
from agent.podworkers.podsync import PodSyncer
from agent.podworkers.types import UpdatePodOptions, UpdateType
from agent.podworkers.workers import PodWorkers
from agent.prober.containers import container_view, exec_runner
from agent.prober.manager import ProbeManager
from agent.prober.worker import ContainerView
from agent.util.configobjects import NO_OBJECTS, ConfigObjects, pod_references
from agent.volumemanager.manager import VolumeManager
from kubenode.model import Pod
from kubenode.model.quantity import to_amount

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

QOS_UPDATE_INTERVAL_S = 60.0  # the kubelet's periodicQOSCgroupUpdateInterval
FLUSH_TIMEOUT_S = 30.0  # how long stop waits for the pod records' last fsyncs
ORPHAN_GRACE_S = 1  # grace for runtime pods unknown to config, as the kubelet uses
# A loop iteration may kill an orphan (grace, then up to 10 s for SIGKILL): beyond this it is stuck.
LOOP_STALL_S = 60.0


# The log manager asks every 10 s for every running container's log: a Path made once per log, not per ask.
_log_path = functools.lru_cache(maxsize=4096)(Path)


class NodeAgent(PodSyncer):
    """The node agent: its state, lifecycle, loop and status; the pod manager and admission
    (agent/pod/podmanager.py) and the syncs (agent/podworkers/podsync.py) are its parts."""

    def __init__(
        self,
        config: AgentConfig,
        cm: ContainerManager,
        runtime: PodRuntime,
        store: RecordStore,
        host: HostInfo,
        sources: Sequence[PodSource],
        *,
        objects: ConfigObjects = NO_OBJECTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Assembled by agent/composition.py (`compose_node`), which builds the runtime first."""
        self.config = config
        self.cm = cm
        self.cgroups = cm.cgroups
        self.devices = cm.devices
        self.topology = cm.topology
        self.sources = list(sources)
        self._clock = clock
        self._base_allocatable = dict(host.allocatable or {})
        self.store = store
        self.host = host
        self.runtime = runtime
        self.volumes = VolumeManager(config.state_dir, self.host, objects)
        self.pod_event: Callable[[Pod, str, str, str], None] | None = None
        self.workers = PodWorkers(self, clock=clock, resync_interval=config.resync_interval)
        self.evictions = EvictionManager(
            self,
            parse_thresholds(
                config.eviction_hard,
                config.eviction_soft,
                config.eviction_soft_grace_period,
                config.eviction_minimum_reclaim,
            ),
            self._observe_signals,
            period=config.eviction_monitoring_period,
            transition_period=config.eviction_pressure_transition_period,
            max_pod_grace_period=config.eviction_max_pod_grace_period,
            clock=clock,
        )
        self.log_manager = ContainerLogManager(
            self._live_logs,
            max_size=to_amount("memory", config.container_log_max_size),
            max_files=config.container_log_max_files,
            interval=config.container_log_monitor_interval,
        )
        # Probes of every pod (agent/prober): readiness changes reach the status manager as a "probe"
        # observation; a liveness or startup failure syncs the pod, whose SyncPod kills the container.
        self.prober = ProbeManager(self._probe_view, self._probe_exec, host_ip=self.host.pod_ip, clock=clock)
        self.prober.on_change = functools.partial(self._observe, operation="probe")
        self.prober.on_unhealthy = self._probe_unhealthy
        self._lock = threading.RLock()
        self._qos_lock = threading.Lock()
        self._desired: dict[str, Pod] = {}  # by UID, every source merged
        self._by_source: dict[str, set[str]] = {}
        self._rejected: dict[str, Rejection] = {}
        self._held: dict[str, Pod] = {}  # adds waiting for their full name to be free
        self._records: dict[str, PodRecord] = {}
        self._adopted: set[str] = set()  # records of the previous run: already admitted
        self._errors: dict[str, tuple[ManifestError, ...]] = {}
        self._admitting: dict[str, Pod] | None = None
        self._in_snapshot = False
        self._sources_ready = False
        self._stop = threading.Event()
        self._loop_thread: threading.Thread | None = None
        self._last_qos_update = 0.0
        self._last_housekeeping = 0.0
        self._last_relist = 0.0
        self._pod_refs: dict[str, tuple[Pod, frozenset[tuple[str, str, str]]]] = {}  # housekeeping's
        self.pleg: EventedPLEG | None = None  # with a runtime that streams container events
        self.last_tick = time.monotonic()  # for the systemd watchdog: the loop is alive
        self._started_at = clock()
        # Told (uid, operation, seconds or None) after every sync, a rejection, and when a kill starts
        # ("killing"): the status manager and metrics of a node that joined a cluster.
        self.observers: list[Callable[[str, str, float | None], None]] = []

    def sources_ready(self) -> bool:
        """Every source has delivered its first snapshot (a source may have a `ready` flag that says so)."""
        return self._sources_ready and all(getattr(s, "ready", True) for s in self.sources)

    # ----- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._started_at = self._clock()
        self.cgroups.start(self._base_allocatable)
        self._restore()
        opener = getattr(self.runtime, "container_events", None)
        if opener is not None:  # before the sources: no container of theirs starts unseen
            self.pleg = EventedPLEG(opener, self._on_container_event, self.relist, self._wake_loop)
            self.pleg.start()
        for source in self.sources:
            source.start(self._on_snapshot)
        with self._lock:
            self._sources_ready = True
        if self.devices is not None:
            self.devices.retain_pods(set(self._desired) | set(self._records))
        self.housekeeping()
        self.prober.start()
        self._loop_thread = threading.Thread(target=self._loop, name="agent-loop", daemon=True)
        self._loop_thread.start()
        self.log_manager.start()
        if self.config.eviction_monitoring_period > 0:  # 0: no eviction manager (hollow nodes, tests)
            self.evictions.start()

    # ----- the eviction manager's view of the node (agent/eviction) --------------------------------------

    def _observe_signals(self, candidates: Sequence[PodUsage]) -> dict[str, Observation]:
        # The pods' working set is the one the round already read for each candidate: read once, not twice.
        allocatable = self.allocatable()
        return observe(
            self.config.state_dir,
            self._base_allocatable.get("memory", 0),
            allocatable.get("memory", 0),
            lambda: sum(u.memory for u in candidates),
        )

    def eviction_candidates(self) -> list[PodUsage]:
        with self._lock:
            placed = {uid for uid, record in self._records.items() if record.cgroup}
        return [
            pod_usage(
                pod,
                self.cgroups,
                self.runtime.pod_logs_dir(pod.namespace, pod.name, pod.uid),
                self.config.state_dir,
                placed=pod.uid in placed,
            )
            for pod in self.active_pods()
        ]

    def evict_pod(self, pod: Pod, message: str, grace_override: int | None) -> None:
        """The kubelet's evictPod: the pod fails with reason Evicted, then is killed (the status manager
        records the Evicted event with the message)."""
        with self._lock:
            record = self._records.get(pod.uid)
            if record is not None:
                record.phase, record.reason, record.message = "Failed", "Evicted", message
        if record is not None:
            with contextlib.suppress(RecordWriteError):
                self.store.save(record)
        self.workers.update_pod(
            UpdatePodOptions(UpdateType.KILL, pod, grace_period_override=grace_override, evict=True)
        )

    def reclaim_dead_container_logs(self) -> int:
        with self._lock:
            records = list(self._records.values())
        return reclaim_dead_logs(records)

    def _live_logs(self) -> list[LiveLog]:
        """The live log of every running container, with the runtime's way to reopen it (the log manager
        rotates those)."""
        with self._lock:
            records = list(self._records.values())
        return [
            LiveLog(_log_path(c.log_path), self.runtime.log_reopener(record.uid, c.name))
            for record in records
            for c in list(record.containers.values())
            if c.state == RUNNING and c.log_path
        ]

    def stop(self, *, terminate_pods: bool = False, timeout: float = 60.0) -> None:
        """Stop watching and syncing. With terminate_pods, first stop every pod and remove its cgroup."""
        self.log_manager.stop()
        self.evictions.stop()
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
        if self.pleg is not None:
            self.pleg.stop()
        self._stop.set()
        self._wake_loop()
        if self._loop_thread is not None:
            self._loop_thread.join(10)
        self.workers.stop()
        self.prober.stop()
        # The records saved by the last syncs are on disk before stop returns (bounded: a stalled disk must
        # not hold the agent's exit; the records are in place for the next start either way).
        if not self.store.flush(timeout=FLUSH_TIMEOUT_S):
            log.warning("pod records not yet on disk after %.0f s; stopping anyway", FLUSH_TIMEOUT_S)

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

    # ----- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # the loop must survive anything one pod does
                log.exception("agent loop iteration failed")
            self.last_tick = time.monotonic()
            now = self._clock()
            next_relist = self._last_relist + self.relist_period()
            next_housekeeping = self._last_housekeeping + self.config.housekeeping_interval
            # The work queue wakes it earlier when a pod's work comes due.
            self.workers.queue.wait(max(0.0, min(next_relist, next_housekeeping) - now))

    def _tick(self) -> None:
        now = self._clock()
        if now - self._last_relist >= self.relist_period():
            self._last_relist = now
            self.relist()
        self.workers.requeue_due()
        if now - self._last_housekeeping >= self.config.housekeeping_interval or self._held:
            self._last_housekeeping = now
            self.housekeeping()

    def relist_period(self) -> float:
        """The generic relist's period: `relist_interval`, or 300 s while the Evented PLEG is in use."""
        evented = self.pleg is not None and self.pleg.in_use
        return EVENTED_RELIST_PERIOD_S if evented else self.config.relist_interval

    def _wake_loop(self) -> None:
        self.workers.queue.enqueue("", 0)

    def _on_container_event(self, event: ContainerEvent) -> None:
        """The Evented PLEG's ContainerDied: the pod gets a sync, as when the relist sees the exit (a start
        needs none: the sync that started the container reported it)."""
        if event.kind != CONTAINER_STOPPED:
            return
        with self._lock:
            pod = None if event.pod_uid in self._rejected else self._desired.get(event.pod_uid)
        if pod is not None and self.runtime.has_exited(pod.uid):
            self.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod))

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
        volume_dirs = self.volumes.pod_uids_on_disk()
        # With a CRI runtime: pods it holds a sandbox or container of, record and cgroup or not (an agent
        # killed between RunPodSandbox and its record, a pod deleted while the agent was down).
        held = getattr(self.runtime, "held_pods", None)
        in_runtime: set[str] = held() if held is not None else set()
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
            records = set(self._records)
        self._cleanup_orphans(stale_records | ((pod_cgroups | in_runtime) - known - wanted))
        # Volumes of pods nobody knows (the agent was killed between a pod's end and its cleanup).
        # The ConfigMaps and Secrets no active pod references leave the cache (the kubelet's UnregisterPod).
        self.volumes.objects.forget_except(self._referenced_objects(admitted))
        # Listed before the workers were asked, like the cgroups: a pod added meanwhile is never taken.
        for uid in self.volumes.cleanup_orphans(volume_dirs - known - wanted - records):
            log.info("removed the volumes of orphaned pod %s", uid)
        now = self._clock()
        if now - self._last_qos_update >= QOS_UPDATE_INTERVAL_S:
            self._last_qos_update = now
            self._update_qos(self.active_pods())

    def _referenced_objects(self, pods: Iterable[Pod]) -> set[tuple[str, str, str]]:
        """The ConfigMaps and Secrets these pods reference, worked out once per Pod object (a pod keeps its
        object until it changes; housekeeping asks every 2 s for every pod)."""
        refs: set[tuple[str, str, str]] = set()
        known: dict[str, tuple[Pod, frozenset[tuple[str, str, str]]]] = {}
        for pod in pods:
            cached = self._pod_refs.get(pod.uid)
            if cached is None or cached[0] is not pod:
                cached = (pod, frozenset(pod_references(pod)))
            known[pod.uid] = cached
            refs |= cached[1]
        self._pod_refs = known
        return refs

    def _cleanup_orphans(self, orphans: Iterable[str]) -> None:
        """Stop and remove what runs for pods nobody wants (from a previous run, or removed while down)."""
        for uid in sorted(orphans):
            with self._lock:
                record = self._records.pop(uid, None)
                self._adopted.discard(uid)
            log.info("stopping orphaned pod %s", record.key if record else uid)
            self.prober.remove_pod(uid)
            try:
                self.runtime.kill_pod(uid, record, self.cgroups, lambda: ORPHAN_GRACE_S)
                self.cgroups.destroy(uid)
                self.volumes.unmount_pod(uid)
            except (CgroupError, RuntimeError) as exc:
                log.warning("cleaning up orphaned pod %s: %s", uid, exc)
                continue
            if self.devices is not None:
                self.devices.free_pod(uid)
            self.runtime.forget(uid)
            self.store.delete(uid)
            if record is not None:
                self.runtime.remove_logs(record.namespace, record.name, uid)

    # ----- probes ------------------------------------------------------------------------------

    def _probe_view(self, uid: str, container: str) -> ContainerView | None:
        with self._lock:
            return container_view(self._desired.get(uid), self._records.get(uid), container)

    def _probe_exec(self, pod: Pod, container: str) -> ExecRunner:
        cri_runner = getattr(self.runtime, "cri_exec_runner", None)  # with a CRI endpoint: ExecSync
        runner = cri_runner(pod.uid, container) if cri_runner is not None else None
        if runner is not None:
            return runner  # type: ignore[no-any-return]

        def container_pid() -> int | None:
            with self._lock:
                record = self._records.get(pod.uid)
                c = record.containers.get(container) if record is not None else None
                return c.pid if c is not None else None

        return exec_runner(
            pod, container, self.cgroups.procs_files, self.host, self.runtime.security, container_pid
        )

    def _probe_unhealthy(self, uid: str) -> None:
        with self._lock:
            pod = self._desired.get(uid)
        if pod is not None:
            self.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod))

    # ----- status ------------------------------------------------------------------------------

    def pods(self) -> list[PodView]:
        with self._lock:
            views = [self._view(uid, record) for uid, record in self._records.items()]
        return sorted(views, key=lambda v: v.record.key)

    def record_uids(self) -> set[str]:
        """The UIDs of the pods the agent holds a record of (the status manager's resync looks at those)."""
        with self._lock:
            return set(self._records)

    def pod_views(self, uids: Iterable[str]) -> dict[str, PodView]:
        """The views of these pods only (those with a record), for a caller that handles a few pods a
        round (the status manager) and must not build every pod's view for them."""
        with self._lock:
            return {
                uid: self._view(uid, record) for uid in uids if (record := self._records.get(uid)) is not None
            }

    def has_sources_besides(self, source: str) -> bool:
        """Whether a source other than `source` (the API server's) feeds the agent: static pods may come."""
        return any(getattr(other, "name", "") != source for other in self.sources)

    def views_not_from(self, source: str) -> list[PodView]:
        """The views of the pods of every source but `source` (the API server's: the static pods, which the
        mirror-pod round looks at every 2 s), found by the sources' index rather than by looking at every pod.
        """
        with self._lock:
            return [
                self._view(uid, record)
                for name, uids in self._by_source.items()
                if name != source
                for uid in uids
                if (record := self._records.get(uid)) is not None
                and (pod := self._desired.get(uid)) is not None
                and pod.source != source
            ]

    def _view(self, uid: str, record: PodRecord) -> PodView:
        """Under self._lock."""
        work = self.workers.work_type(uid)
        worker = "rejected" if uid in self._rejected else (work.value if work else "")
        if uid in self._held:
            worker = "waiting"
        return PodView(self._desired.get(uid), record, worker)

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
            pod_json(view, self.limits_of(view.record.uid) if view.record.cgroup else {}, self.prober.status)
            for view in self.pods()
        ]
        if self.topology is not None:  # what the Topology Manager saw and chose, for `kubenode trace`
            for item in items:
                item["kubenode"]["topology"] = self.topology.describe(item["metadata"]["uid"])
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


def _container_status(c: Any, ready: bool) -> dict[str, Any]:
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
        "ready": ready,
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


def pod_json(
    view: PodView, limits: Mapping[str, str], probes: Callable[[str, str, bool], tuple[bool, bool]]
) -> dict[str, Any]:
    """The agent's own view of a pod (`/pods`, `kubenode agent status`); `probes` says which running
    containers are ready (the prober's readiness, as in the API status)."""
    r = view.record

    def status_of(c: Any) -> dict[str, Any]:
        return _container_status(c, probes(r.uid, c.name, c.state == RUNNING)[1])

    # The pod's worker adds to these dicts while a sync runs: iterate (and serialise) copies, each
    # taken in one step, or this raises "dictionary changed size during iteration".
    containers = list(r.containers.values())
    resources = dict(r.resources)
    status: dict[str, Any] = {
        "phase": r.phase,
        "qosClass": r.qos,
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "initContainerStatuses": [status_of(c) for c in containers if c.init],
        "containerStatuses": [status_of(c) for c in containers if not c.init],
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
            "deviceSpecs": {
                name: [f"{d.host_path}:{d.container_path}:{d.permissions}" for d in given.devices]
                for name, given in resources.items()
            },
            "mounts": {
                name: [
                    f"{m.host_path}:{m.container_path}{':ro' if m.read_only else ''}" for m in given.mounts
                ]
                for name, given in resources.items()
            },
            "restarts": r.restarts(),
            "seen": rfc3339(),
        },
    }
