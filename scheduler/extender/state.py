"""The extender's view of the cluster and its three answers, without HTTP.

Informers (nodes; pods but the finished ones) feed a SchedulerCache, the same node table
and accounting the scheduler uses: every bound pod counts on its node. Pending pods are
not queued (kube-scheduler schedules them); the pod informer keeps them, so /bind can find
a pod's requests by name. Pods seen in /filter requests are remembered too (by uid), since
kube-scheduler asks /filter just before /bind and the informer may lag.

- filter: our filter plugins (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
  NodeResourcesFit over every resource, including the ones kube-scheduler leaves to us)
  for the pod over the named nodes. A node failing only on resources goes to FailedNodes
  with kube's reasons ("Insufficient kubenode.io/gpu"); one failing a label/taint filter,
  or unknown to the cache, goes to FailedAndUnresolvableNodes (preemption cannot help).
- prioritize: the profile's score plugins over those nodes, scaled from the plugins' total
  (0..100 x sum of weights) down to the extender scale 0..10.
- assume/forget: /bind checks the pod still fits the node (another /bind may have taken the
  room since its /filter) and counts it there before POSTing the Binding, so the next
  /filter already sees the devices as used; a failed bind forgets it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import repeat

import numpy as np

from kubenode.model.objects import Node, Pod
from scheduler.cache import CacheError, SchedulerCache
from scheduler.extender_api import MAX_EXTENDER_PRIORITY
from scheduler.filters import OK, STATIC_REASONS, Demand, NodeFree, run_filters
from scheduler.informers import BadObject
from scheduler.nodetable import Int64Array
from scheduler.profile import Configuration, Profile
from scheduler.scoring import MAX_NODE_SCORE, total_scores

RECENT_PODS = 4096  # pods from /filter requests remembered for /bind
RECENT_NAME_LISTS = 2  # node-name lists whose slots are kept (/filter's, /prioritize's)


def unknown_node(name: str) -> str:
    return f"node {name!r} is not in the extender's cache"


class ExtenderState:
    def __init__(self, config: Configuration, wall_clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.cache = SchedulerCache(wall_clock)
        self.lock = threading.Lock()
        self._recent: OrderedDict[str, Pod] = OrderedDict()
        self.pending: dict[str, Pod] = {}  # unbound pods from the informer, by namespace/name
        self._recent_slots: list[tuple[list[str], Int64Array]] = []  # see _slots

    def profile_for(self, pod: Pod) -> Profile:
        """The profile named by the pod's schedulerName, else the file's first one."""
        profiles = self.config.profiles
        return profiles.get(pod.scheduler_name) or next(iter(profiles.values()), Profile())

    # --- informer handlers ------------------------------------------------------------
    def node_changed(self, node: Node | BadObject) -> None:
        with self.lock:
            if isinstance(node, BadObject):
                self._remove_node(node.name)
            else:
                if node.name not in self.cache.table.slot:
                    self._recent_slots.clear()  # a new name-to-slot entry
                self.cache.put_node(node)

    def node_deleted(self, node: Node | BadObject) -> None:
        with self.lock:
            self._remove_node(node.name)

    def _remove_node(self, name: str) -> None:
        self._recent_slots.clear()  # its slot may be reused for another name
        self.cache.remove_node(name)

    def pod_changed(self, pod: Pod | BadObject) -> None:
        with self.lock:
            if isinstance(pod, BadObject) or pod.phase in ("Succeeded", "Failed"):
                self.pending.pop(pod.key, None)
                self.cache.remove_pod(pod.key)
            elif pod.node_name:
                self.pending.pop(pod.key, None)
                self.cache.add_pod(pod)  # confirms a pod this extender assumed
            else:
                self.pending[pod.key] = pod

    def pod_deleted(self, pod: Pod | BadObject) -> None:
        with self.lock:
            self.pending.pop(pod.key, None)
            self.cache.remove_pod(pod.key)

    # --- verbs ------------------------------------------------------------------------
    def _remember(self, pod: Pod) -> None:
        if pod.uid:
            self._recent[pod.uid] = pod
            self._recent.move_to_end(pod.uid)
            while len(self._recent) > RECENT_PODS:
                self._recent.popitem(last=False)

    def _slots(self, names: Sequence[str]) -> Int64Array:
        """Each name's slot in the node table, -1 for a name the cache lacks (map: no Python loop).

        kube-scheduler sends the same list (its feasible nodes, in its snapshot's order) for pod
        after pod, so the last few answers are kept until a node comes or goes: comparing two
        lists of names costs about a third of looking every name up."""
        for cached, slots in self._recent_slots:
            if cached == names:
                return slots
        slots = np.fromiter(map(self.cache.table.slot.get, names, repeat(-1)), np.int64, len(names))
        self._recent_slots.insert(0, (list(names), slots))
        del self._recent_slots[RECENT_NAME_LISTS:]
        return slots

    def filter(self, pod: Pod, names: Sequence[str]) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(names that pass, FailedNodes, FailedAndUnresolvableNodes)."""
        with self.lock:
            self._remember(pod)
            result = run_filters(self.cache.table, pod, Demand.of(pod, self.profile_for(pod)), {})
            slots = self._slots(names)
            known = slots >= 0
            passing = known.copy()
            passing[known] = result.feasible[slots[known]]
            passed = [names[i] for i in np.flatnonzero(passing).tolist()]
            unresolvable = {names[i]: unknown_node(names[i]) for i in np.flatnonzero(~known).tolist()}
            # Failing nodes grouped by verdict: a static filter's code (negated), or the set of
            # fit reasons as a bit mask; one message per group, not per node.
            failing = np.flatnonzero(known & ~passing)
            failing_slots = slots[failing]
            codes = result.codes[failing_slots]
            bits = np.zeros(len(failing), np.int64)
            for bit, (_, bad) in enumerate(result.failures):
                bits |= bad[failing_slots].astype(np.int64) << bit
            verdicts = np.where(codes != OK, -codes, bits)
            failed: dict[str, str] = {}
            for verdict in np.unique(verdicts).tolist():
                members = [names[i] for i in failing[verdicts == verdict].tolist()]
                if verdict < 0:
                    unresolvable.update(zip(members, repeat(STATIC_REASONS[-verdict][1])))
                else:
                    reasons = [r for bit, (r, _) in enumerate(result.failures) if verdict >> bit & 1]
                    failed.update(zip(members, repeat(", ".join(reasons))))
            return passed, failed, unresolvable

    def prioritize(self, pod: Pod, names: Sequence[str]) -> list[tuple[str, int]]:
        """0..10 per named node (0 for a node the cache does not know)."""
        with self.lock:
            table = self.cache.table
            profile = self.profile_for(pod)
            slots = self._slots(names)
            known = slots >= 0
            mask = np.zeros(table.size, bool)
            mask[slots[known]] = True
            totals = total_scores(table, profile, pod, Demand.of(pod, profile), mask)
            most = MAX_NODE_SCORE * max(sum(profile.weights.values()), 1)
            scaled = np.zeros(len(names), np.int64)
            scaled[known] = totals[slots[known]] * MAX_EXTENDER_PRIORITY // most
            return list(zip(names, scaled.tolist(), strict=True))

    def pod_for_binding(self, namespace: str, name: str, uid: str) -> Pod | None:
        with self.lock:
            pod = self._recent.get(uid) if uid else None
            if pod is None:
                pod = self.pending.get(f"{namespace}/{name}")
            if pod is None or (uid and pod.uid and pod.uid != uid):
                return None
            return pod

    def assume(self, pod: Pod, node: str) -> str:
        """Count the pod on node now, if it still fits there. Returns why not ("" when assumed).

        kube-scheduler binds asynchronously: its /filter for the next pod can come before the
        /bind of this one, so two pods may have been told the same last GPU is free. The check
        here turns the second bind into an error (kube-scheduler then retries that pod), so a
        node is never over-committed."""
        with self.lock:
            slot = self.cache.table.slot.get(node)
            if slot is None:
                return unknown_node(node)
            bound = replace(pod, node_name=node)
            demand = Demand.of(bound, self.profile_for(bound))
            shortfalls = NodeFree(self.cache.table, slot, demand, {}).shortfalls()
            if shortfalls:
                return f"pod {pod.key} no longer fits node {node}: {', '.join(shortfalls)}"
            try:
                self.cache.assume(bound, node, demand)
            except CacheError as exc:
                return str(exc)
            return ""

    def forget(self, pod: Pod, node: str) -> None:
        with self.lock:
            if self.cache.is_assumed(pod.key):
                self.cache.forget(pod.key, node)

    def finish(self, pod: Pod) -> None:
        with self.lock:
            self._recent.pop(pod.uid, None)
            self.cache.finish_binding(pod.key)
