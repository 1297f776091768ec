"""NodeAgent: the kubelet's sync loop, lifecycle and status, over parts that each do one job.

Flow: sources deliver snapshots to the pod manager (agent/pod/podmanager.py), which diffs them into adds
(admitted, or rejected with phase Failed; held while an earlier pod of the same namespace/name terminates),
updates and removals (kills) for the pod workers (agent/podworkers/workers.py); the workers call the
syncer (agent/podworkers/podsync.py: SyncPod, SyncTerminatingPod, SyncTerminatedPod). The pods' state is
the PodTable (agent/pod/podtable.py) all of them share; their views for the status endpoint, status manager
and mirror pods are PodViews (agent/pod/podviews.py). The parts handed in are built by agent/composition.py.

A loop thread does what the kubelet's PLEG, sync ticker and housekeeping do: it notices exited processes
(and syncs their pod), re-delivers due work (resync, backoff), and every `housekeeping_interval` runs
housekeeping (agent/housekeeping.py). The relist runs every `relist_interval` (the generic PLEG); with a
runtime that streams its container events (a hollow node's), the Evented PLEG's thread syncs a pod as its
container stops, and the relist runs every 300 s as a safety net, back at `relist_interval` once the stream
has failed for good (agent/kuberuntime/pleg/). The loop sleeps until its next relist, housekeeping or due
work. On start, saved pod records are matched against the pod cgroups so processes of pods still wanted
are adopted rather than restarted; everything else found is stopped and removed once the sources have
delivered their first snapshot.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agent.apis.config import AgentConfig
from agent.cm.cgroups import CgroupError
from agent.cm.containermanager import ContainerManager
from agent.config.sources import PodSource
from agent.container.downwardapi import HostInfo
from agent.container.execresult import ExecRunner
from agent.container.podrecord import RUNNING, RecordStore
from agent.container.runtime import PodRuntime
from agent.eviction.manager import EvictionManager
from agent.eviction.thresholds import parse_thresholds
from agent.housekeeping import Housekeeping
from agent.kuberuntime.pleg import CONTAINER_STOPPED, EVENTED_RELIST_PERIOD_S, ContainerEvent, EventedPLEG
from agent.logs.manager import ContainerLogManager, LiveLog
from agent.pod.evictiontarget import NodeEvictionTarget
from agent.pod.podmanager import PodManager
from agent.pod.podtable import PodTable
from agent.pod.podviews import PodViews
from agent.podworkers.podsync import PodSyncer
from agent.podworkers.types import UpdatePodOptions, UpdateType
from agent.podworkers.workers import PodWorkers
from agent.prober.containers import container_view, exec_runner
from agent.prober.manager import ProbeManager
from agent.prober.worker import ContainerView
from agent.status.endpoint import pod_list
from agent.token.manager import TokenManager
from agent.util.configobjects import NO_OBJECTS, ConfigObjects
from agent.volumemanager.manager import VolumeManager
from kubenode.model import Pod
from kubenode.model.quantity import to_amount

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 30.0  # how long stop waits for the pod records' last fsyncs
# A loop iteration may kill an orphan (grace, then up to 10 s for SIGKILL): beyond this it is stuck.
LOOP_STALL_S = 60.0


# The log manager asks every 10 s for every running container's log: a Path made once per log, not per ask.
_log_path = functools.lru_cache(maxsize=4096)(Path)


class NodeAgent:
    """The node agent: its lifecycle, loop, housekeeping and status. Its parts are handed in (the container
    manager, the runtime, the record store: agent/composition.py) or made here: the pod table, the pod
    manager and admission (agent/pod/), the syncer (agent/podworkers/podsync.py) and the pod workers."""

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
        tokens: TokenManager | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Assembled by agent/composition.py (`compose_node`), which builds the runtime first."""
        self.config = config
        self.cm = cm
        self.sources = list(sources)
        self._clock = clock
        self.store = store
        self.host = host
        self.runtime = runtime
        self.table = PodTable()
        self.volumes = VolumeManager(config.state_dir, self.host, objects, tokens)
        # (pod, type, reason, message): the kubelet's events about a pod as a whole (FailedMount), set when
        # the agent joins a cluster.
        self.pod_event: Callable[[Pod, str, str, str], None] | None = None
        # Told (uid, operation, seconds or None) after every sync, a rejection, and when a kill starts
        # ("killing"): the status manager and metrics of a node that joined a cluster.
        self.observers: list[Callable[[str, str, float | None], None]] = []
        # Probes of every pod (agent/prober): readiness changes reach the status manager as a "probe"
        # observation; a liveness or startup failure syncs the pod, whose SyncPod kills the container.
        self.prober = ProbeManager(self._probe_view, self._probe_exec, host_ip=self.host.pod_ip, clock=clock)
        self.prober.on_change = functools.partial(self._observe, operation="probe")
        self.prober.on_unhealthy = self._probe_unhealthy
        self.syncer = PodSyncer(
            self.table,
            cm,
            runtime,
            self.volumes,
            self.prober,
            store,
            active_pods=self.active_pods,
            resync_others=self._resync_others,
            wake=self._wake_loop,
            observe=self._observe,
            pod_event=self._pod_event,
        )
        self.workers = PodWorkers(self.syncer, clock=clock, resync_interval=config.resync_interval)
        self.pod_manager = PodManager(
            config,
            self.table,
            self.workers,
            cm,
            store,
            observe=self._observe,
            base_allocatable=host.allocatable or {},
            clock=clock,
        )
        self.views = PodViews(self.table, self.workers, self.sources)
        self.housekeeper = Housekeeping(
            self.table, self.pod_manager, self.workers, cm, runtime, self.volumes, self.prober, store, clock
        )
        self.eviction_target = NodeEvictionTarget(
            config,
            self.table,
            cm,
            runtime,
            store,
            self.workers,
            base_allocatable=host.allocatable or {},
            allocatable=self.allocatable,
            active_pods=self.active_pods,
        )
        self.evictions = EvictionManager(
            self.eviction_target,
            parse_thresholds(
                config.eviction_hard,
                config.eviction_soft,
                config.eviction_soft_grace_period,
                config.eviction_minimum_reclaim,
            ),
            self.eviction_target.observe_signals,
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
        self._sources_ready = False
        self._stop = threading.Event()
        self._loop_thread: threading.Thread | None = None
        self._last_housekeeping = 0.0
        self._last_relist = 0.0
        self.pleg: EventedPLEG | None = None  # with a runtime that streams container events
        self.last_tick = time.monotonic()  # for the systemd watchdog: the loop is alive

    # ----- what the parts ask of the node ------------------------------------------------------

    def active_pods(self) -> list[Pod]:
        """Admitted pods not yet terminated (what admission and the QoS tiers count)."""
        return self.pod_manager.active_pods()

    def allocatable(self) -> dict[str, int]:
        return self.pod_manager.allocatable()

    def _observe(self, uid: str, operation: str, started: float | None = None) -> None:
        seconds = None if started is None else time.monotonic() - started
        for observer in self.observers:
            try:
                observer(uid, operation, seconds)
            except Exception:
                log.exception("pod observer failed")

    def _pod_event(self, pod: Pod, kind: str, reason: str, message: str) -> None:
        if self.pod_event is not None:
            self.pod_event(pod, kind, reason, message)

    def _resync_others(self, uid: str) -> None:
        """The shared CPU pool changed: every other running pod gets its cpuset rewritten now."""
        for other in self.active_pods():
            if other.uid != uid:
                self.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, other))

    def sources_ready(self) -> bool:
        """Every source has delivered its first snapshot (a source may have a `ready` flag that says so)."""
        return self._sources_ready and all(getattr(s, "ready", True) for s in self.sources)

    # ----- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.pod_manager.started()
        self.cm.cgroups.start(self.host.allocatable or {})
        self._restore()
        opener = getattr(self.runtime, "container_events", None)
        if opener is not None:  # before the sources: no container of theirs starts unseen
            self.pleg = EventedPLEG(opener, self._on_container_event, self.relist, self._wake_loop)
            self.pleg.start()
        for source in self.sources:
            source.start(self.pod_manager.on_snapshot)
        with self.table.lock:
            self._sources_ready = True
        if self.cm.devices is not None:
            self.cm.devices.retain_pods(set(self.table.desired) | set(self.table.records))
        self.housekeeping()
        self.prober.start()
        self._loop_thread = threading.Thread(target=self._loop, name="agent-loop", daemon=True)
        self._loop_thread.start()
        self.log_manager.start()
        if self.config.eviction_monitoring_period > 0:  # 0: no eviction manager (hollow nodes, tests)
            self.evictions.start()

    def _live_logs(self) -> list[LiveLog]:
        """The live log of every running container, with the runtime's way to reopen it (the log manager
        rotates those)."""
        with self.table.lock:
            records = list(self.table.records.values())
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
            with self.table.lock:
                pods = [self.table.pod_for(uid) for uid in self.workers.known_uids()]
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
        existing = self.cm.cgroups.list_pods()
        for uid, record in records.items():
            pids = self.cm.cgroups.pids(uid) if uid in existing else set()
            adopted = self.runtime.adopt(record, pids)
            if adopted:
                log.info("pod %s: adopted running containers %s", record.key, ", ".join(adopted))
            self.table.records[uid] = record
            self.table.adopted.add(uid)

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
        if now - self._last_housekeeping >= self.config.housekeeping_interval or self.table.held:
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
        with self.table.lock:
            pod = None if event.pod_uid in self.table.rejected else self.table.desired.get(event.pod_uid)
        if pod is not None and self.runtime.has_exited(pod.uid):
            self.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod))

    def relist(self) -> None:
        """PLEG: a pod whose process exited gets a sync."""
        with self.table.lock:
            pods = [(uid, pod) for uid, pod in self.table.desired.items() if uid not in self.table.rejected]
        for uid, pod in pods:
            if self.runtime.has_exited(uid):
                self.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod))

    def housekeeping(self) -> None:
        with self.table.lock:
            if not self.sources_ready():
                return
        self.housekeeper.run()

    # ----- probes ------------------------------------------------------------------------------

    def _probe_view(self, uid: str, container: str) -> ContainerView | None:
        with self.table.lock:
            return container_view(self.table.desired.get(uid), self.table.records.get(uid), container)

    def _probe_exec(self, pod: Pod, container: str) -> ExecRunner:
        cri_runner = getattr(self.runtime, "cri_exec_runner", None)  # with a CRI endpoint: ExecSync
        runner = cri_runner(pod.uid, container) if cri_runner is not None else None
        if runner is not None:
            return runner  # type: ignore[no-any-return]

        def container_pid() -> int | None:
            with self.table.lock:
                record = self.table.records.get(pod.uid)
                c = record.containers.get(container) if record is not None else None
                return c.pid if c is not None else None

        def procs_files(of: Pod) -> list[str]:
            return self.cm.cgroups.container_procs_files(of, container)  # its cgroup: its limits, its devices

        return exec_runner(pod, container, procs_files, self.host, self.runtime.security, container_pid)

    def _probe_unhealthy(self, uid: str) -> None:
        with self.table.lock:
            pod = self.table.desired.get(uid)
        if pod is not None:
            self.workers.update_pod(UpdatePodOptions(UpdateType.SYNC, pod))

    # ----- status ------------------------------------------------------------------------------

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

    def limits_of(self, uid: str) -> dict[str, str]:
        with contextlib.suppress(CgroupError, OSError):
            return self.cm.cgroups.read_limits(uid)
        return {}

    def status_json(self) -> dict[str, Any]:
        """The status endpoint's PodList (agent/status/endpoint.py)."""
        return pod_list(
            self.config.node_name,
            self.views.pods(),
            self.limits_of,
            self.prober.status,
            self.cm.topology.describe if self.cm.topology is not None else None,
            self.views.manifest_errors(),
        )

    def wait_for_phase(self, uid: str, phases: Iterable[str], timeout: float) -> bool:
        """Poll (tests, `kubenode up`) until the pod's recorded phase is one of `phases`."""
        wanted = set(phases)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.table.lock:
                record = self.table.records.get(uid)
                if record is not None and record.phase in wanted:
                    return True
            time.sleep(0.02)
        return False
