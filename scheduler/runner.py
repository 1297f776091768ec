"""`kubenode scheduler run`: the engine connected to an API server.

Flow, as kube-scheduler's Run:
1. Informers for nodes and pods start at once (also on a follower, so a new leader starts
   with a warm cache) and feed the engine (`scheduler.informers`).
2. With leader election, a LeaderElector on a Lease decides who schedules; without it this
   process always does.
3. The scheduling loop waits until both informers have synced (then, in `kubenode scheduler
   run`, settles the heap: the listed objects leave the cyclic collector's passes) and this
   process leads, then
   runs the engine's cycle: pop, filter, score, assume, send the bind (`scheduler.apibinder`,
   on the client's reactor thread, which also writes the Scheduled event once the binding is
   answered), and go on to the next pod at once. A failed attempt is
   reported by `scheduler.statuswriter` (FailedScheduling event + PodScheduled=False).
4. Metrics (`scheduler.metrics`) count every attempt; /healthz fails when the leader's
   lease renewal is overdue.
5. Losing the Lease stops scheduling at once (the binder and status writer refuse to write
   from that moment) and `run` returns 1, so the process exits non-zero and its
   supervisor restarts it as a follower. SIGTERM/SIGINT stop it cleanly (the Lease is
   released) with 0.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubenode.kubeclient import NODE_RESOURCE_TOPOLOGIES, KubeClient
from kubenode.kubeclient.config import ClientConfig
from kubenode.kubeclient.errors import Forbidden, KubeError, NotFound
from kubenode.kubeclient.events import WARNING, EventRecorder
from kubenode.kubeclient.leaderelection import ClientLeaseStore, ElectionConfig, LeaderElector
from kubenode.model.objects import Pod
from scheduler.apibinder import ApiBinder, pod_reference
from scheduler.clock import MonotonicClock
from scheduler.dra.live import ApiClaimWriter, DraInformers, ParsedClaims, serves_dra
from scheduler.engine import Scheduler
from scheduler.extenders import with_extender_binder
from scheduler.informers import BadObject, EventRouter, node_informer, pod_informer, topology_informer
from scheduler.metrics import MetricsServer, SchedulerMetrics
from scheduler.outcome import Outcome
from scheduler.profile import Configuration
from scheduler.queue import QueuedPod
from scheduler.statuswriter import StatusWriter

log = logging.getLogger(__name__)

DEFAULT_LOCK_NAME = "kubenode-scheduler"
# Binds in flight at once. Throughput is at most binds in flight / bind latency, and a durable API
# server's write latency is tens of ms under load (its group commit batches concurrent writes),
# so many are in flight; kube binds in a goroutine each, within its client's burst of 100.
# Bindings and the Scheduled events that follow them are sent by the client's reactor
# (kubenode.kubeclient.reactor): one thread, with up to twice this many connections (one binding
# and one event per pod), in place of a thread per request in flight, whose GIL handoffs and
# wakeups cost more CPU than the requests (binding and event threads, 64 each, cost ~0.3 ms/pod).
BINDING_WORKERS = 64
EVENT_QUEUE = 20000  # Scheduled events of a burst of pods are queued, not dropped
# The cyclic collector's thresholds once synced (CPython's: 700, 10, 10): a young collection every
# 100,000 allocations, a full one after 100 middle ones (and, as always, a quarter's growth).
GC_THRESHOLDS = (100_000, 10, 100)


@dataclass(frozen=True)
class RunOptions:
    config: Configuration
    leader_elect: bool = False
    election: ElectionConfig = field(default_factory=lambda: ElectionConfig(name=DEFAULT_LOCK_NAME))
    metrics_address: tuple[str, int] | None = None
    binding_workers: int = BINDING_WORKERS


class LiveScheduler:
    def __init__(
        self,
        client_config: ClientConfig,
        options: RunOptions,
        *,
        on_synced: Callable[[], None] = lambda: None,
    ) -> None:
        """on_synced: called once, on the scheduling thread, when the informers have first synced."""
        self.options = options
        self._on_synced = on_synced
        self.clock = MonotonicClock()
        # Binds in flight need no pooled connections of the blocking transport: they and the
        # events go out on the client's reactor. The pool serves status writes, preemption and lists.
        self.client = KubeClient(
            client_config,
            user_agent="kubenode-scheduler",
            pool_size=8,
            async_connections=2 * options.binding_workers,
        )
        self._stop = threading.Event()
        self._leading = threading.Event()
        self.lost_leadership = False
        component = next(iter(options.config.profiles), "default-scheduler")
        self.recorder = EventRecorder(self.client, component, queue_size=EVENT_QUEUE, asynchronous=True)
        self.elector: LeaderElector | None = None
        if options.leader_elect:
            # Lease calls get their own client with a short timeout: a hung request must not
            # outlast the renew deadline.
            lease_client = KubeClient(
                client_config,
                user_agent="kubenode-scheduler/leader-election",
                timeout=max(1.0, options.election.retry_period),
            )
            self.elector = LeaderElector(
                ClientLeaseStore(lease_client),
                options.election,
                on_started_leading=self._started_leading,
                on_stopped_leading=self._stopped_leading,
                on_new_leader=lambda who: log.info("new leader: %s", who),
            )
        else:
            self._leading.set()
        self.binder = ApiBinder(self.client, self.recorder, may_act=self.may_act)
        self.status = StatusWriter(self.client, self.recorder, may_act=self.may_act)
        self.engine = Scheduler(
            self.binder,
            options.config,
            clock=self.clock,
            on_binding_done=self._binding_done,
            victims_leave_on_eviction=False,
            binding_workers=options.binding_workers,
        )
        # kube's extendersBinding: a pod an interested binding extender manages is bound by it.
        self.engine.binder = with_extender_binder(self.binder, self.engine.extenders)
        self.metrics = SchedulerMetrics(self._pending_counts)
        self.metrics_server: MetricsServer | None = None
        if options.metrics_address is not None:
            self.metrics_server = MetricsServer(self.metrics, *options.metrics_address)
            if self.elector is not None:
                self.metrics_server.checks["leaderElection"] = self.elector.health_problem
            self.metrics_server.ready_checks["informerSync"] = lambda: (
                None if self.synced() else "informers have not synced"
            )
        self.router = EventRouter(self.engine, self._report_bad_pod, pod_gone=self.status.forget)
        self.nodes = node_informer(self.client, self.router)
        self.pods = pod_informer(self.client, self.router)
        self.topologies = topology_informer(self.client, self.router)
        # ResourceSlices, DeviceClasses, ResourceClaims for DynamicResources; claim status written at PreBind.
        claims = ParsedClaims()  # the writer's answers spare the informer a parse
        self.engine.dra.writer = ApiClaimWriter(self.client, self.may_act, claims)
        self.dra = DraInformers(self.client, self.engine.dra, claims)
        self._serves_dra = True
        # Whether the API serves NodeResourceTopology (a kube-apiserver without the CRD does not): only
        # then does scheduling wait for its informer, so that no pod is bound on a stale NUMA picture.
        self._serves_topologies = True
        self._threads: list[threading.Thread] = []

    # --- leadership -------------------------------------------------------------------
    def may_act(self) -> bool:
        """Whether this process may write: it leads (the elector's own flag drops the moment a
        renewal deadline passes, before any callback runs) and is not stopping."""
        if self.elector is not None and not self.elector.is_leader():
            return False
        return self._leading.is_set() and not self._stop.is_set()

    def _started_leading(self) -> None:
        log.info("started leading")
        self._leading.set()
        with self.engine.wakeup:
            self.engine.wakeup.notify_all()

    def _stopped_leading(self) -> None:
        self._leading.clear()
        if not self._stop.is_set():
            self.lost_leadership = True
            log.error("leader election lost: stopping")
            self._stop.set()
        with self.engine.wakeup:
            self.engine.wakeup.notify_all()

    # --- reporting --------------------------------------------------------------------
    def _pending_counts(self) -> dict[str, int]:
        with self.engine.lock:
            return self.engine.queue.counts()

    def _report_bad_pod(self, bad: BadObject) -> None:
        if self.may_act():
            ref = pod_reference(Pod(name=bad.name, namespace=bad.namespace, uid=bad.uid))
            self.recorder.event(ref, WARNING, "FailedScheduling", f"invalid pod: {bad.message}")
            self.metrics.attempt("error", bad.scheduler_name, 0.0)

    def _handle(self, outcome: Outcome, seconds: float) -> None:
        """After one cycle. A placed pod is counted once its binding is done."""
        if outcome.node is not None:
            return
        profile = outcome.pod.scheduler_name
        self.metrics.attempt("error" if outcome.error else "unschedulable", profile, seconds)
        if outcome.victims or outcome.nominated_node:
            self.metrics.preempted(len(outcome.victims))
        self.status.failed(outcome.pod, outcome.message, outcome.nominated_node, error=outcome.error)

    def _binding_done(self, qp: QueuedPod, pod: Pod, node: str, error: Exception | None) -> None:
        now = self.clock.now()
        if error is None:
            self.metrics.attempt("scheduled", pod.scheduler_name, now - qp.popped)
            self.metrics.scheduled(qp.attempts, now - qp.added)
            self.status.forget(pod.key)
            return
        self.metrics.attempt("error", pod.scheduler_name, now - qp.popped)
        log.warning("binding %s to %s failed: %s", pod.key, node, error)
        if self.may_act():
            self.recorder.event(pod_reference(pod), WARNING, "FailedScheduling", f"Binding rejected: {error}")

    # --- the loop ---------------------------------------------------------------------
    def synced(self) -> bool:
        topologies = self.topologies.has_synced.is_set() or not self._serves_topologies
        dra = self.dra.synced() or not self._serves_dra
        return self.nodes.has_synced.is_set() and self.pods.has_synced.is_set() and topologies and dra

    def _schedule_loop(self) -> None:
        engine = self.engine
        settled = False
        while not self._stop.is_set():
            if not self.may_act() or not self.synced():
                self._stop.wait(0.05)
                continue
            if not settled:
                settled = True
                self._on_synced()
            started = time.perf_counter()
            try:
                outcome = engine.schedule_one()
            except Exception:  # an engine bug: log it, keep scheduling the others
                log.exception("scheduling cycle failed")
                continue
            if outcome is not None:
                self._handle(outcome, time.perf_counter() - started)
                continue
            with engine.wakeup:
                expiry = engine.queue.next_backoff_expiry()
                wait = 1.0 if expiry is None else min(1.0, max(0.0, expiry - self.clock.now()))
                engine.wakeup.wait(wait)

    def _spawn(self, target: Callable[[], object], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def start(self) -> None:
        if self.metrics_server is not None:
            self.metrics_server.start()
        self.recorder.start()
        self.nodes.start()
        self.pods.start()
        try:
            self.client.list(NODE_RESOURCE_TOPOLOGIES, limit=1)
        except NotFound:
            self._serves_topologies = False
            log.info("the API serves no NodeResourceTopology: the NUMA filter stays idle")
        except Forbidden as err:  # waiting for an informer that can never list would stop all scheduling
            self._serves_topologies = False
            log.warning("NodeResourceTopology may not be read (%s): the NUMA filter stays idle", err)
        except KubeError as err:  # the informer retries; scheduling waits for it
            log.warning("listing NodeResourceTopology: %s", err)
        if self._serves_topologies:
            self.topologies.start()
        self._serves_dra = serves_dra(self.client)
        if self._serves_dra:
            self.dra.start()
        if self.elector is not None:
            elector = self.elector
            self._spawn(lambda: elector.run(self._stop), "leader-election")
        self._spawn(self._schedule_loop, "schedule")

    def stop(self) -> None:
        self._stop.set()
        with self.engine.wakeup:
            self.engine.wakeup.notify_all()
        for thread in self._threads:
            thread.join(15)
        self.nodes.stop()
        self.pods.stop()
        if self._serves_topologies:
            self.topologies.stop()
        if self._serves_dra:
            self.dra.stop()
        self.engine.close()
        self.status.close()
        self.recorder.stop()
        if self.metrics_server is not None:
            self.metrics_server.stop()
        self.client.close()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until stopped (a signal, or lost leadership); True if it stopped."""
        return self._stop.wait(timeout)

    def request_stop(self) -> None:
        self._stop.set()
        with self.engine.wakeup:
            self.engine.wakeup.notify_all()


def settle_heap() -> None:
    """Once the informers have listed the cluster, its objects live as long as the process: move
    them out of the cyclic collector's sight (gc.freeze), so that its full passes no longer walk
    every node and pod each time the heap has grown by a quarter, and collect less often
    (GC_THRESHOLDS: each watched pod allocates hundreds of objects, nearly all freed by reference
    counting). Measured on SchedulingBasic: the collector cost ~0.1 ms CPU per scheduled pod
    (0.43 -> 0.34 ms with it off); with these settings it is ~0.03 ms."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run_scheduler(client_config: ClientConfig, options: RunOptions) -> int:
    """Run until SIGTERM/SIGINT (0) or lost leadership (1)."""
    import signal

    scheduler = LiveScheduler(client_config, options, on_synced=settle_heap)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: scheduler.request_stop())
    scheduler.start()
    if scheduler.metrics_server is not None:
        host, _ = options.metrics_address or ("", 0)
        log.info("serving /metrics and /healthz on %s:%d", host, scheduler.metrics_server.port)
    while not scheduler.wait(1.0):
        pass
    scheduler.stop()
    return 1 if scheduler.lost_leadership else 0
