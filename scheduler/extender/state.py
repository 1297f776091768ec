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
- assume/forget: /bind counts the pod on its node before POSTing the Binding, so the next
  /filter already sees the devices as used; a failed bind forgets it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from kubenode.model.objects import Node, Pod
from scheduler.cache import CacheError, SchedulerCache
from scheduler.extender_api import MAX_EXTENDER_PRIORITY
from scheduler.filters import OK, STATIC_REASONS, Demand, run_filters
from scheduler.informers import BadObject
from scheduler.profile import Configuration, Profile
from scheduler.scoring import MAX_NODE_SCORE, total_scores

RECENT_PODS = 4096  # pods from /filter requests remembered for /bind


def unknown_node(name: str) -> str:
    return f"node {name!r} is not in the extender's cache"


class ExtenderState:
    def __init__(self, config: Configuration, wall_clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.cache = SchedulerCache(wall_clock)
        self.lock = threading.Lock()
        self._recent: OrderedDict[str, Pod] = OrderedDict()
        self.pending: dict[str, Pod] = {}  # unbound pods from the informer, by namespace/name

    def profile_for(self, pod: Pod) -> Profile:
        """The profile named by the pod's schedulerName, else the file's first one."""
        profiles = self.config.profiles
        return profiles.get(pod.scheduler_name) or next(iter(profiles.values()), Profile())

    # --- informer handlers ------------------------------------------------------------
    def node_changed(self, node: Node | BadObject) -> None:
        with self.lock:
            if isinstance(node, BadObject):
                self.cache.remove_node(node.name)
            else:
                self.cache.put_node(node)

    def node_deleted(self, node: Node | BadObject) -> None:
        with self.lock:
            self.cache.remove_node(node.name)

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

    def filter(self, pod: Pod, names: Sequence[str]) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(names that pass, FailedNodes, FailedAndUnresolvableNodes)."""
        with self.lock:
            self._remember(pod)
            table = self.cache.table
            result = run_filters(table, pod, Demand.of(pod, self.profile_for(pod)), {})
            slot_of = table.slot
            slots = np.fromiter((slot_of.get(n, -1) for n in names), np.int64, len(names))
            known = slots >= 0
            passing = known.copy()
            passing[known] = result.feasible[slots[known]]
            passed = [names[i] for i in np.flatnonzero(passing).tolist()]
            failed: dict[str, str] = {}
            unresolvable: dict[str, str] = {}
            for i in np.flatnonzero(~passing).tolist():
                name, slot = names[i], int(slots[i])
                if slot < 0:
                    unresolvable[name] = unknown_node(name)
                elif (code := int(result.codes[slot])) != OK:
                    unresolvable[name] = STATIC_REASONS[code][1]
                else:
                    failed[name] = ", ".join(reason for reason, bad in result.failures if bad[slot])
            return passed, failed, unresolvable

    def prioritize(self, pod: Pod, names: Sequence[str]) -> list[tuple[str, int]]:
        """0..10 per named node (0 for a node the cache does not know)."""
        with self.lock:
            table = self.cache.table
            profile = self.profile_for(pod)
            slot_of = table.slot
            slots = np.fromiter((slot_of.get(n, -1) for n in names), np.int64, len(names))
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
        """Count the pod on node now. Returns why not ("" when assumed)."""
        with self.lock:
            if self.cache.node(node) is None:
                return unknown_node(node)
            bound = replace(pod, node_name=node)
            try:
                self.cache.assume(bound, node, Demand.of(bound))
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
