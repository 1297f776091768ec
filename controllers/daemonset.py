"""The DaemonSet controller (kube's pkg/controller/daemon): one pod on every eligible node.

Flow of `sync(namespace/name)`:
1. Claim pods (as the ReplicaSet controller) and group the active ones by node.
2. A node is eligible when the template's nodeSelector and required node affinity match it and the
   template's tolerations, plus the ones kube adds to every daemon pod (not-ready and unreachable
   NoExecute; disk, memory and pid pressure and unschedulable NoSchedule), tolerate its NoSchedule
   and NoExecute taints. A node with an untolerated NoSchedule taint keeps a pod it already runs;
   an untolerated NoExecute taint removes it (kube's NodeShouldRunDaemonPod).
3. Eligible nodes without a pod get one, bound directly (spec.nodeName, plus the node-name affinity
   kube's controller writes), its template hash in `controller-revision-hash`; extra pods, pods on
   nodes that are no longer eligible, and Failed pods are deleted; a node's pod that failed is made again
   after kube's backoff (1 s doubling to 15 min), not in a loop.
4. RollingUpdate: pods of an old template hash are deleted while fewer than maxUnavailable nodes are
   without an available pod; the next sync makes the new ones. OnDelete: nothing is replaced.
5. Status: desiredNumberScheduled, currentNumberScheduled, numberMisscheduled, numberReady,
   updatedNumberScheduled, numberAvailable, numberUnavailable, observedGeneration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from controllers.deploymentutil import template_hash
from controllers.framework import Obj, SharedInformers, meta
from controllers.pods import is_active, is_available, is_ready, pod_from_template
from controllers.replicaset import PodOwnerController
from controllers.resources import DAEMONSETS, NODES, PODS
from kubenode.kubeclient import KubeClient
from kubenode.model.errors import ValidationError
from kubenode.model.matching import matches_node_selector_and_affinity, untolerated_taints
from kubenode.model.parse import parse_node, parse_pod

REVISION_LABEL = "controller-revision-hash"
FAILED_BACKOFF_S = (1.0, 900.0)  # kube's failedPodsBackoff: first delay and cap
# AddOrUpdateDaemonPodTolerations: every daemon pod tolerates these.
DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def daemon_template(ds: Obj) -> dict[str, Any]:
    """The template with kube's daemon tolerations added (those it already has kept)."""
    template = dict((ds.get("spec") or {}).get("template") or {})
    spec = dict(template.get("spec") or {})
    tolerations = list(spec.get("tolerations") or [])
    for toleration in DAEMON_TOLERATIONS:
        if not any(
            t.get("key") == toleration["key"] and t.get("effect") == toleration["effect"] for t in tolerations
        ):
            tolerations.append(toleration)
    spec["tolerations"] = tolerations
    template["spec"] = spec
    return template


def node_fit(template: Mapping[str, Any], node: Obj) -> tuple[bool, bool]:
    """(should schedule a new pod here, may keep a running one) for a template on a node."""
    stub = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "daemon"},
        "spec": template.get("spec") or {},
    }
    try:
        pod, parsed_node = parse_pod(stub), parse_node(node)
    except ValidationError:
        return False, False
    if not matches_node_selector_and_affinity(pod, parsed_node):
        return False, False
    if untolerated_taints(pod.tolerations, parsed_node.taints, {"NoExecute"}):
        return False, False
    return not untolerated_taints(pod.tolerations, parsed_node.taints, {"NoSchedule"}), True


def _bound_to(pod: Obj, node_name: str) -> Obj:
    spec = dict(pod["spec"])
    spec["nodeName"] = node_name
    field = {"key": "metadata.name", "operator": "In", "values": [node_name]}
    spec["affinity"] = {
        **(spec.get("affinity") or {}),
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [field]}]
            }
        },
    }
    return {**pod, "spec": spec}


class DaemonSetController(PodOwnerController):
    name = "daemonset"
    resource = DAEMONSETS

    def __init__(
        self, client: KubeClient, informers: SharedInformers, may_act: Callable[[], bool], **kw: Any
    ) -> None:
        super().__init__(client, informers, may_act, **kw)
        # kube's failedPodsBackoff: a pod that keeps failing on a node is made again after 1 s, doubling to
        # 15 min, not in a hot loop. (DaemonSet key, node) -> (next delay, not before).
        self._failed_backoff: dict[tuple[str, str], tuple[float, float]] = {}
        self._failed_seen: set[str] = set()  # uids of failed pods already counted (bounded by failures)
        self.nodes = informers.on(NODES, add=self._node_changed, update=lambda _o, n: self._node_changed(n),
                                  delete=self._node_changed)  # fmt: skip

    def _node_changed(self, _node: Obj) -> None:
        for ds in self.owners.items():
            self.enqueue(ds)

    def sync(self, key: str) -> None:
        ds = self.owners.get(key)
        if ds is None:
            self.expectations.forget(key)
            return
        template = daemon_template(ds)
        revision = template_hash(template)
        pods = self.claimed_pods(ds)
        by_node: dict[str, list[Obj]] = {}
        for pod in pods:
            if not meta(pod).get("deletionTimestamp"):
                by_node.setdefault(str((pod.get("spec") or {}).get("nodeName") or ""), []).append(pod)
        create: list[str] = []
        delete: list[Obj] = []
        wanted: list[str] = []
        for node in self.nodes.items():
            name = str(meta(node).get("name"))
            schedule, keep = node_fit(template, node)
            here = [p for p in by_node.pop(name, []) if is_active(p) or _failed(p)]
            failed = [p for p in here if _failed(p)]
            if failed:
                delete += failed
                if any(meta(p).get("uid") not in self._failed_seen for p in failed):
                    self._failed_seen.update(str(meta(p).get("uid")) for p in failed)
                    self._back_off(key, name)
            running = [p for p in here if not _failed(p)]
            if schedule or (keep and running):
                wanted.append(name)
                if not running and self._may_create(key, name):
                    create.append(name)
                delete += sorted(running, key=lambda p: str(meta(p).get("creationTimestamp")))[1:]
            else:
                delete += running
        for leftover in by_node.values():  # pods on nodes that are gone
            delete += [p for p in leftover if is_active(p) or _failed(p)]
        if self.expectations.satisfied(key) and not meta(ds).get("deletionTimestamp"):
            delete += self._rolling_deletes(ds, revision, pods, wanted, delete)
            if delete:
                self.delete_pods(key, delete)
            if create:
                self._create_on(key, ds, template, revision, create)
        self._sync_status(ds, revision, pods, wanted)

    def _back_off(self, key: str, node: str) -> None:
        delay, _ = self._failed_backoff.get((key, node), (FAILED_BACKOFF_S[0] / 2, 0.0))
        delay = min(delay * 2, FAILED_BACKOFF_S[1])
        self._failed_backoff[(key, node)] = (delay, self.clock() + delay)
        self.queue.add_after(key, delay)

    def _may_create(self, key: str, node: str) -> bool:
        _, not_before = self._failed_backoff.get((key, node), (0.0, 0.0))
        return self.clock() >= not_before

    def _rolling_deletes(
        self, ds: Obj, revision: str, pods: list[Obj], wanted: list[str], doomed: list[Obj]
    ) -> list[Obj]:
        strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type") == "OnDelete":
            return []
        value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
        if isinstance(value, str) and value.endswith("%"):
            budget = math.ceil(int(value[:-1]) * len(wanted) / 100)
        else:
            budget = int(value or 0)
        budget = max(budget, 1)
        now = self.clock()
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        live = [p for p in pods if is_active(p) and p not in doomed]
        available_on = {str(p["spec"].get("nodeName")) for p in live if is_available(p, min_ready, now)}
        unavailable = sum(1 for n in wanted if n not in available_on)
        old = [p for p in live if (meta(p).get("labels") or {}).get(REVISION_LABEL) != revision]
        old_down = [p for p in old if str(p["spec"].get("nodeName")) not in available_on]
        old_up = [p for p in old if str(p["spec"].get("nodeName")) in available_on]
        return (
            old_down + sorted(old_up, key=lambda p: str(meta(p).get("name")))[: max(budget - unavailable, 0)]
        )

    def _create_on(
        self, key: str, ds: Obj, template: Mapping[str, Any], revision: str, nodes: list[str]
    ) -> None:
        self.expectations.expect(key, len(nodes), 0)
        body = pod_from_template(ds, template, {REVISION_LABEL: revision})
        for i, node in enumerate(nodes):
            try:
                made = self.client.create(PODS, _bound_to(body, node), meta(ds).get("namespace"))
            except Exception:
                for _ in nodes[i:]:
                    self.expectations.created(key)
                raise
            self.event(ds, "SuccessfulCreate", f"Created pod: {meta(made).get('name')}")

    def _sync_status(self, ds: Obj, revision: str, pods: list[Obj], wanted: list[str]) -> None:
        now = self.clock()
        min_ready = int((ds.get("spec") or {}).get("minReadySeconds") or 0)
        live = [p for p in pods if is_active(p)]
        on = {str((p.get("spec") or {}).get("nodeName")): p for p in live}
        scheduled = [n for n in wanted if n in on]
        ready = [n for n in scheduled if is_ready(on[n])]
        available = [n for n in scheduled if is_available(on[n], min_ready, now)]
        updated = [n for n in scheduled if (meta(on[n]).get("labels") or {}).get(REVISION_LABEL) == revision]
        if min_ready and len(available) < len(ready):
            self.queue.add_after(f"{meta(ds).get('namespace')}/{meta(ds).get('name')}", float(min_ready))
        self.write_status(ds, {
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": len(scheduled),
            "numberMisscheduled": sum(1 for n in on if n not in wanted),
            "numberReady": len(ready),
            "updatedNumberScheduled": len(updated),
            "numberAvailable": len(available),
            "numberUnavailable": len(wanted) - len(available),
            "observedGeneration": meta(ds).get("generation", 0),
        })  # fmt: skip


def _failed(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Failed"
