"""The scheduling engine: cluster events in, placements out through a Binder.

The engine knows nothing about where events come from. The live scheduler
(`scheduler/runner.py`) feeds it pod and node add/update/delete events from API server
informers and gives it a Binder that POSTs Bindings and deletes victims
(`scheduler/apibinder.py`); the simulator feeds it a file and binds in memory. Both run
this same code.

One cycle (`schedule_one`), as kube-scheduler's scheduleOne: pop the next pod; filter
every node; if the pod's nominated node passes, take it; one feasible node is taken
without scoring; otherwise score every feasible node and take the best, ties broken at
random (seedable). The pod is assumed in the cache at once and bound asynchronously (by
an AsyncBinder's `bind_async`, after the claims' PreBind writes, else on the binding pool's
threads); a failed bind forgets it and sends it to backoff. With no feasible node, preemption
is tried and the pod waits in the queue with kube-scheduler's FitError message.
Configured extenders (scheduler.extenders) filter after the plugins and add their
prioritize scores; an extender error fails the cycle unless the extender is ignorable.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from kubenode.model.objects import Node, Pod
from scheduler.cache import SchedulerCache
from scheduler.clock import Clock, MonotonicClock
from scheduler.dra.plugin import PLUGIN as DRA_PLUGIN
from scheduler.dra.plugin import DynamicResources
from scheduler.extenders import ExtenderChain
from scheduler.filters import (
    FIT_PLUGIN,
    OK,
    Demand,
    FilterResult,
    NodeFree,
    Reserved,
    fit_error_message,
    run_filters,
    static_code,
)
from scheduler.nodetable import Int64Array
from scheduler.numa import PLUGIN as NUMA_PLUGIN
from scheduler.numa import NodeTopology, Placement
from scheduler.numafilter import TopologyStore, filter_numa, numa_scores
from scheduler.outcome import Binder, Nomination, Outcome
from scheduler.picking import pick, pick_by_shape
from scheduler.preemption import Preemption, find_preemption
from scheduler.profile import NUMA, Configuration, Profile
from scheduler.queue import QueuedPod, SchedulingQueue
from scheduler.scoring import normalised_scores, total_scores
from scheduler.shapecache import BoolArray, ShapeCache

NO_NODES = "no nodes available to schedule pods"
LEFTOVER_FLUSH_SECONDS = 30.0


class Scheduler:
    def __init__(
        self,
        binder: Binder,
        config: Configuration | None = None,
        *,
        clock: Clock | None = None,
        wall_clock: Callable[[], float] = time.time,
        seed: int | None = None,
        run_binding: Callable[[Callable[[], None]], None] | None = None,
        observer: Callable[[Outcome], None] | None = None,
        on_binding_done: Callable[[QueuedPod, Pod, str, Exception | None], None] | None = None,
        victims_leave_on_eviction: bool = True,
        binding_workers: int = 4,
        shape_cache: bool = True,
    ) -> None:
        self.config = config or Configuration()
        self.binder = binder
        self.clock = clock or MonotonicClock()
        self.queue = SchedulingQueue(
            self.clock, self.config.initial_backoff_seconds, self.config.max_backoff_seconds
        )
        self.cache = SchedulerCache(wall_clock)
        self.nominations: dict[str, Nomination] = {}
        self.lock = threading.RLock()
        self.wakeup = threading.Condition(self.lock)
        self._rng = random.Random(seed)
        self._pool: ThreadPoolExecutor | None = None
        self._run_binding = run_binding or self._submit_to_pool
        self._observer = observer
        self._on_binding_done = on_binding_done
        # In memory an evicted victim is gone at once. Through an API server it is only asked
        # to leave (graceful deletion): it stays counted on its node until the pod informer
        # reports it deleted, and the nominated preemptor waits for that, as in kube.
        self._victims_leave_on_eviction = victims_leave_on_eviction
        self._binding_workers = binding_workers
        self._binds_in_flight = 0  # by an AsyncBinder
        self._binds_done = threading.Condition(self.lock)
        self._last_leftover_flush = self.clock.now()
        # Extenders of the configuration (scheduler.extenders); None keeps the plain path as it was.
        self.extenders = ExtenderChain(self.config.extenders) if self.config.extenders else None
        # Nodes' NodeResourceTopology objects, for the NUMA filter and score (scheduler/numa.py).
        self.topologies = TopologyStore()
        # Verdicts and local scores of pods of an equal shape (scheduler/shapecache.py); None: off.
        self.shapes = ShapeCache() if shape_cache else None
        # Pods' ResourceClaims (scheduler/dra/plugin.py); its events requeue the pods it turned down.
        self.dra = DynamicResources(self._dra_changed)

    def profile_for(self, pod: Pod) -> Profile | None:
        return self.config.profiles.get(pod.scheduler_name)

    # --- cluster events ---------------------------------------------------------------
    def add_node(self, node: Node) -> None:
        self.update_node(node)

    def update_node(self, node: Node) -> None:
        with self.lock:
            old = self.cache.put_node(node)
            slot = self.cache.table.slot[node.name]
            if old is None:
                self.dra.counts.invalidate()  # its per-node arrays follow the table's slots

            def helped(qp: QueuedPod) -> bool:
                # NodeResourcesFit/TaintToleration/NodeAffinity hints: the pod now fits this node,
                # and the node is new, newly acceptable, or has more of something the pod asks for.
                # A pod no plugin rejected (there were no nodes) is always retried, as kube does.
                if not qp.rejected_by:
                    return True
                if not self._passes(qp.pod, slot):
                    return False
                if old is None or static_code(qp.pod, old) != OK:
                    return True
                return any(node.allocatable.get(r, 0) > old.allocatable.get(r, 0) for r in qp.pod.requests)

            self.queue.move_all(helped)
            self.wakeup.notify_all()

    def update_topology(self, topology: NodeTopology | None, name: str = "") -> None:
        """A node published its NUMA zones (None: its object is gone): pods the NUMA filter turned down
        may fit now."""
        with self.lock:
            if topology is None:
                self.topologies.remove(name)
            else:
                self.topologies.put(topology)
            self.queue.move_all(lambda qp: NUMA_PLUGIN in qp.rejected_by)
            self.wakeup.notify_all()

    def remove_node(self, name: str) -> None:
        with self.lock:
            self.cache.remove_node(name)
            self.dra.counts.invalidate()
            for key, nomination in list(self.nominations.items()):
                if nomination.node == name:
                    del self.nominations[key]

    def add_pod(self, pod: Pod) -> bool:
        """A pod appeared or changed. Returns False for a pending pod of another scheduler."""
        with self.lock:
            if pod.phase in ("Succeeded", "Failed"):
                self.remove_pod(pod)
                return True
            if pod.node_name:
                self.queue.delete(pod.key)
                self.nominations.pop(pod.key, None)
                self.cache.add_pod(pod)
                return True
            profile = self.profile_for(pod)
            if profile is None:
                return False
            if pod.nominated_node_name and pod.key not in self.nominations:
                self.nominations[pod.key] = Nomination(
                    pod.nominated_node_name, pod.priority, Demand.of(pod, profile)
                )
            queued = self.queue.get(pod.key)
            claims_made = queued is not None and self.dra.claims_made(queued.pod, pod)
            self.queue.add(pod)
            if claims_made:  # kube's hint: its generated ResourceClaims are now named in its status
                self.queue.activate(pod.key)
            self.wakeup.notify_all()
            return True

    update_pod = add_pod

    def remove_pod(self, pod: Pod) -> None:
        with self.lock:
            self.queue.delete(pod.key)
            self.nominations.pop(pod.key, None)
            if self.cache.remove_pod(pod.key) is not None:
                self._assigned_pod_gone()

    def _assigned_pod_gone(self) -> None:
        """An assigned pod left: pods NodeResourcesFit or the NUMA filter rejected may fit now."""
        self.queue.move_all(lambda qp: not qp.rejected_by or bool({FIT_PLUGIN, NUMA_PLUGIN} & qp.rejected_by))
        self.wakeup.notify_all()

    def _dra_changed(self) -> None:
        """A ResourceSlice, DeviceClass or ResourceClaim changed, or devices were given back."""
        with self.lock:
            self.queue.move_all(lambda qp: DRA_PLUGIN in qp.rejected_by)
            self.wakeup.notify_all()

    # --- helpers ----------------------------------------------------------------------
    def _passes(self, pod: Pod, slot: int) -> bool:
        """Would the pod pass every filter on this one node right now?"""
        table = self.cache.table
        if static_code(pod, table.node(slot)) != OK:
            return False
        demand = Demand.of(pod, self.profile_for(pod))
        held = self.reserved_for(pod).get(slot, {})
        if NodeFree(table, slot, demand, held).shortfalls():
            return False
        name = table.node(slot).name
        return self.topologies.admits(pod, name, lambda: self._pods_on(name))

    def _pods_on(self, node: str) -> list[Pod]:
        return [state.pod for state in self.cache.pods_on(node)]

    def reserved_for(self, pod: Pod) -> Reserved:
        """What pods nominated to nodes, of at least this pod's priority, hold there."""
        reserved: dict[int, dict[str, int]] = {}
        for key, nomination in self.nominations.items():
            slot = self.cache.table.slot.get(nomination.node)
            if key == pod.key or slot is None or nomination.priority < pod.priority:
                continue
            held = reserved.setdefault(slot, {})
            held["pods"] = held.get("pods", 0) + 1
            for name, amount in nomination.demand.requests.items():
                held[name] = held.get(name, 0) + amount
        return reserved

    def _nominated_slot(self, pod: Pod) -> int | None:
        nomination = self.nominations.get(pod.key)
        name = nomination.node if nomination else pod.nominated_node_name
        return self.cache.table.slot.get(name) if name else None

    def _pick(self, pod: Pod, feasible: BoolArray, totals: Callable[[], Int64Array]) -> int | None:
        return pick(feasible, totals, self._nominated_slot(pod), self._rng)

    def _totals(
        self,
        pod: Pod,
        profile: Profile,
        demand: Demand,
        result: FilterResult,
        placements: dict[int, Placement],
    ) -> Int64Array:
        totals = total_scores(self.cache.table, profile, pod, demand, result.feasible)
        if placements and profile.weights.get(NUMA):
            totals += profile.weights[NUMA] * numa_scores(placements, self.cache.table.size)
        if self.extenders is not None:
            totals += self.extenders.scores(pod, self.cache.table, result.feasible)
        return totals

    def _pick_by_shape(
        self, shapes: ShapeCache, pod: Pod, profile: Profile, demand: Demand, excluded: BoolArray | None
    ) -> int | None:
        """_pick over the shape cache's verdicts and local scores (scheduler/shapecache.py); `excluded`:
        nodes DynamicResources turned down."""
        table = self.cache.table
        scores, vary = shapes.evaluate(table, profile, pod, demand)
        return pick_by_shape(
            scores,
            vary,
            excluded,
            lambda feasible: normalised_scores(table, profile, pod, feasible),
            self._nominated_slot(pod),
            self._rng,
        )

    # --- the cycle --------------------------------------------------------------------
    def flush(self) -> None:
        """Backoff and unschedulable-leftover flushes (kube runs these every 1 s and 30 s)."""
        with self.lock:
            self.queue.flush_backoff_completed()
            now = self.clock.now()
            if now - self._last_leftover_flush >= LEFTOVER_FLUSH_SECONDS:
                self._last_leftover_flush = now
                self.queue.flush_unschedulable_leftover()

    def schedule_one(self) -> Outcome | None:
        """Try the next pod in activeQ; None if there is none."""
        with self.lock:
            self.flush()
            while True:
                qp = self.queue.pop()
                if qp is None:
                    return None
                profile = self.profile_for(qp.pod)
                if (
                    profile is not None
                    and not qp.pod.deletion_timestamp
                    and not self.cache.is_assumed(qp.key)
                ):
                    break
                self.queue.done(qp.key)  # another scheduler's, being deleted, or already placed
            outcome = self._schedule(qp, profile)
        if self._observer is not None:
            self._observer(outcome)
        return outcome

    def _schedule(self, qp: QueuedPod, profile: Profile) -> Outcome:
        pod = qp.pod
        table = self.cache.table
        demand = Demand.of(pod, profile)
        if table.node_count == 0:
            self.queue.add_unschedulable(qp, frozenset())
            return Outcome(pod, None, NO_NODES)
        claims = self.dra.applies_to(pod)
        # A pod with claims takes the shape path when DynamicResources can say at once which nodes it rejects.
        waiting, excluded = self.dra.pre_filter(pod, table) if claims else ("", None)
        if waiting:  # PreEnqueue: a claim is missing
            self.queue.add_unschedulable(qp, frozenset({DRA_PLUGIN}))
            return Outcome(pod, None, waiting)
        reserved = self.reserved_for(pod)
        if (
            self.shapes is not None
            and (not claims or excluded is not None)
            and not reserved
            and self.extenders is None
            and not self.topologies.applies_to(pod)
        ):
            # Only each node's own column matters here: the shape cache gives the same verdicts
            # and scores; with no feasible node the full path below says why.
            slot = self._pick_by_shape(self.shapes, pod, profile, demand, excluded)
            if slot is not None:
                return self._assume(qp, demand, slot)
        result = run_filters(table, pod, demand, reserved)
        if claims:
            self.dra.filter(pod, table, result)
        placements = filter_numa(self.topologies, table, pod, result, self._pods_on)
        if self.extenders is not None and (failure := self.extenders.filter(pod, table, result)):
            self.queue.add_error(qp)  # an extender error fails the cycle: back off and retry
            return Outcome(pod, None, failure, error=True)
        slot = self._pick(
            pod, result.feasible, lambda: self._totals(pod, profile, demand, result, placements)
        )
        if slot is None:
            return self._fail(qp, demand, result, reserved)
        return self._assume(qp, demand, slot)

    def _assume(self, qp: QueuedPod, demand: Demand, slot: int) -> Outcome:
        """Place the pod on the slot's node in the cache at once and bind it asynchronously."""
        pod = qp.pod
        node = self.cache.table.node(slot).name
        bound = pod.bound_to(node)
        self.cache.assume(bound, node, demand)
        self.queue.done(pod.key)
        self.nominations.pop(pod.key, None)
        claims = self.dra.applies_to(pod)
        if claims:
            self.dra.reserve(pod, node)
        # An AsyncBinder binds without the pool's threads (unless the caller runs the binds), as kube's
        # binding cycle runs beside the next scheduling cycle; a pod with claims has their status
        # written first (PreBind), asynchronously too, and is bound from the answer.
        bind_async = getattr(self.binder, "bind_async", None)
        if bind_async is not None and self._run_binding == self._submit_to_pool:
            self._binds_in_flight += 1

            def bind(error: Exception | None = None) -> None:
                if error is not None:
                    self._bound(qp, bound, node, error, True)
                    return
                try:
                    bind_async(bound, node, lambda error: self._bound(qp, bound, node, error, True))
                except Exception as exc:  # refused before sending (e.g. no longer leading)
                    self._bound(qp, bound, node, exc, True)

            if claims:
                self.dra.pre_bind_async(bound, node, bind)
            else:
                bind()
        else:
            self._run_binding(lambda: self._bind(qp, bound, node))
        return Outcome(pod, node, f"Successfully assigned {pod.key} to {node}")

    def _fail(self, qp: QueuedPod, demand: Demand, result: FilterResult, reserved: Reserved) -> Outcome:
        pod = qp.pod
        counts = result.histogram()
        preemption, post_filter = find_preemption(pod, demand, self.cache, result, reserved)
        victims: tuple[Pod, ...] = ()
        nominated = ""
        if preemption is not None:
            nominated = preemption.node
            victims, error = self._evict(pod, preemption)
            if error:
                self.queue.add_error(qp)
                return Outcome(pod, None, error, victims=victims, error=True)
            for key, nomination in list(self.nominations.items()):
                if nomination.node == nominated and nomination.priority < pod.priority:
                    del self.nominations[key]  # lower-priority nominations there are void now
                    self.queue.activate(key)
            self.nominations[pod.key] = Nomination(nominated, pod.priority, demand)
            qp.pod = replace(pod, nominated_node_name=nominated)
        message = fit_error_message(self.cache.table.node_count, counts, post_filter)
        self.queue.add_unschedulable(qp, result.rejected_by())
        return Outcome(pod, None, message, nominated, victims)

    def _evict(self, preemptor: Pod, preemption: Preemption) -> tuple[tuple[Pod, ...], str]:
        """Evict the victims one by one, each leaving the cache once the binder has evicted it.
        Returns the evicted pods and, if the binder refused one, why (the preemptor then backs
        off and retries, as kube treats a failed victim deletion as an error for that pod)."""
        evicted: list[Pod] = []
        error = ""
        for state in preemption.victims:
            try:
                self.binder.evict(state.pod, preemptor, preemption.node)
            except Exception as exc:  # any binder failure: report it for this pod, keep scheduling
                error = f"preemption: evicting {state.pod.key} from {preemption.node} failed: {exc}"
                break
            if self._victims_leave_on_eviction:
                self.cache.remove_pod(state.pod.key)
            evicted.append(state.pod)
        if evicted and self._victims_leave_on_eviction:
            self._assigned_pod_gone()
        return tuple(evicted), error

    def _bind(self, qp: QueuedPod, bound: Pod, node: str) -> None:
        try:
            if self.dra.applies_to(bound):
                self.dra.pre_bind(bound, node)
            self.binder.bind(bound, node)
        except Exception as exc:  # any binder failure: undo the assumption and retry later
            self._bound(qp, bound, node, exc)
            return
        self._bound(qp, bound, node, None)

    def _bound(
        self, qp: QueuedPod, bound: Pod, node: str, exc: Exception | None, counted: bool = False
    ) -> None:
        """After the bind: confirm the assumption, or undo it and send the pod to backoff.
        `counted`: a bind by the AsyncBinder, counted in flight until now."""
        try:
            with self.lock:
                if exc is None:
                    self.cache.finish_binding(bound.key)
                elif self.cache.is_assumed(bound.key):  # undo the assumption and retry later
                    self.dra.unreserve(bound)
                    self.cache.forget(bound.key, node)
                    self.queue.add_error(qp)
                    self._assigned_pod_gone()
            if exc is not None and self._observer is not None:
                self._observer(
                    Outcome(qp.pod, None, f"binding to {node} failed: {exc}", bind_failed=True, error=True)
                )
            if self._on_binding_done is not None:
                self._on_binding_done(qp, bound, node, exc)
        finally:
            if counted:
                with self.lock:
                    self._binds_in_flight -= 1
                    if not self._binds_in_flight:
                        self._binds_done.notify_all()

    def _submit_to_pool(self, task: Callable[[], None]) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self._binding_workers, thread_name_prefix="kubenode-bind"
            )
        self._pool.submit(task)

    def close(self, timeout: float = 30.0) -> None:
        """Wait for bindings in flight and stop the binding threads (if the engine made them)."""
        with self._binds_done:
            self._binds_done.wait_for(lambda: not self._binds_in_flight, timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self.extenders is not None:
            self.extenders.close()

    def run(self, stop: threading.Event) -> None:
        """Schedule until stop is set, sleeping while there is nothing to do."""
        while not stop.is_set():
            if self.schedule_one() is not None:
                continue
            with self.wakeup:
                expiry = self.queue.next_backoff_expiry()
                wait = 1.0 if expiry is None else min(1.0, max(0.0, expiry - self.clock.now()))
                self.wakeup.wait(wait)
