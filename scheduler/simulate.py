"""The simulator: a cluster file in, the engine's placements out, with an in-memory binder.

The file holds Node and Pod objects (and optionally PriorityClass objects, which fill
in `spec.priority` from `priorityClassName` as the API server's admission does, and
NodeResourceTopology objects stating a node's NUMA zones: its policy, scope and per-zone
allocatable devices; `available` defaults to allocatable, and the file's bound pods are
placed on top as the node's Topology Manager would place them), and the resource.k8s.io/v1
objects of Dynamic Resource Allocation: ResourceSlice, DeviceClass and ResourceClaim (a claim's
`status.allocation` in the file counts as taken; the result lists each claim's devices). Bound
pods are loaded into the cache; pending pods go through the same engine as the live
scheduler. Time is simulated: when only backed-off pods remain, the clock jumps to the
next backoff expiry, so preemptors get their retry. The run ends when no pod is active
or backing off; pods still parked as unschedulable keep their last failure message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubenode.dra.types import PARSERS as DRA_PARSERS
from kubenode.dra.types import DeviceClass, DraObject, ResourceSlice
from kubenode.model.documents import load_objects
from kubenode.model.errors import ValidationError
from kubenode.model.objects import Node, Pod
from kubenode.model.parse import parse_node, parse_pod
from kubenode.model.quantity import format_amount
from scheduler.cache import parse_start_time
from scheduler.clock import ManualClock
from scheduler.engine import Scheduler
from scheduler.numa import NodeTopology, TopologyError, parse_node_topology
from scheduler.outcome import Outcome
from scheduler.profile import Configuration


@dataclass
class PodResult:
    pod: str
    node: str | None
    message: str


@dataclass
class NodeUsage:
    allocatable: dict[str, int]
    requested: dict[str, int]
    # NUMA zone -> resource -> (available, allocatable), for a node with a NodeResourceTopology
    zones: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)

    def formatted(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "allocatable": {r: format_amount(r, v) for r, v in sorted(self.allocatable.items())},
            "requested": {r: format_amount(r, v) for r, v in sorted(self.requested.items())},
        }
        if self.zones:
            out["zones"] = {
                zone: {r: {"available": a, "allocatable": t} for r, (a, t) in sorted(res.items())}
                for zone, res in self.zones.items()
            }
        return out


@dataclass
class SimulationResult:
    pods: list[PodResult] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    preemptions: list[str] = field(default_factory=list)  # human-readable lines
    nodes: dict[str, NodeUsage] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # objects skipped, with why
    claims: dict[str, list[str]] = field(default_factory=dict)  # claim -> "request driver/pool/device"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pods": [{"pod": p.pod, "node": p.node, "message": p.message} for p in self.pods],
            "preempted": list(self.preempted),
            "nodes": {name: usage.formatted() for name, usage in self.nodes.items()},
        }
        if self.claims:
            out["claims"] = self.claims
        return out


class InMemoryBinder:
    """Binds and evicts by recording; the simulator's stand-in for the API server."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.evicted: list[tuple[str, str, str]] = []  # (victim, preemptor, node)

    def bind(self, pod: Pod, node: str) -> None:
        self.bound[pod.key] = node

    def evict(self, victim: Pod, preemptor: Pod, node: str) -> None:
        self.bound.pop(victim.key, None)
        self.evicted.append((victim.key, preemptor.key, node))


@dataclass
class ClusterObjects:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    invalid_pods: list[PodResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    topologies: list[NodeTopology] = field(default_factory=list)
    dra: list[DraObject] = field(default_factory=list)


def _pod_key(obj: Mapping[str, Any], where: str) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
        namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else "default"
        return f"{namespace}/{meta['name']}"
    return f"<pod at {where or 'top level'}>"


def _priority_classes(objects: list[tuple[str, Mapping[str, Any]]]) -> dict[str, tuple[int, str]]:
    classes: dict[str, tuple[int, str]] = {}
    for _, obj in objects:
        if obj.get("kind") == "PriorityClass":
            name = (obj.get("metadata") or {}).get("name")
            value = obj.get("value")
            if isinstance(name, str) and isinstance(value, int) and not isinstance(value, bool):
                classes[name] = (value, str(obj.get("preemptionPolicy") or "PreemptLowerPriority"))
    return classes


def _with_priority_class(pod: Pod, classes: Mapping[str, tuple[int, str]]) -> Pod:
    spec = pod.raw.get("spec") or {}
    if pod.priority_class_name in classes and "priority" not in spec:
        value, policy = classes[pod.priority_class_name]
        return replace(pod, priority=value, preemption_policy=str(spec.get("preemptionPolicy") or policy))
    return pod


def read_cluster(path: Path) -> ClusterObjects:
    """Parse the file; a bad object is reported and skipped, the rest are kept.
    Raises ValidationError if the file itself cannot be read or decoded."""
    objects = load_objects(path)
    classes = _priority_classes(objects)
    cluster = ClusterObjects()
    # Where each node and pod was first defined: a second object of the same name is
    # refused, as the API server refuses the second create (AlreadyExists).
    node_sources: dict[str, str] = {}
    pod_sources: dict[str, str] = {}
    for where, obj in objects:
        source = f"{path} ({where})" if where else str(path)
        kind = obj.get("kind")
        try:
            if kind == "Node":
                node = parse_node(obj, source)
                if node.name in node_sources:
                    cluster.errors.append(_duplicate("Node", node.name, node_sources[node.name], source))
                else:
                    node_sources[node.name] = source
                    cluster.nodes.append(node)
            elif kind == "Pod":
                pod = _with_priority_class(parse_pod(obj, source), classes)
                if pod.key in pod_sources:
                    cluster.errors.append(_duplicate("Pod", pod.key, pod_sources[pod.key], source))
                else:
                    pod_sources[pod.key] = source
                    cluster.pods.append(pod)
            elif kind == "NodeResourceTopology":
                cluster.topologies.append(parse_node_topology(obj, source))
            elif isinstance(kind, str) and kind in DRA_PARSERS:
                cluster.dra.append(DRA_PARSERS[kind](obj, source))
            elif kind != "PriorityClass":
                known = "Node, Pod, PriorityClass, NodeResourceTopology and resource.k8s.io/v1 DRA objects"
                cluster.errors.append(f"{source}: kind {kind!r} ignored (only {known})")
        except TopologyError as exc:
            cluster.errors.append(f"invalid NodeResourceTopology: {exc}")
        except ValidationError as exc:
            if kind == "Pod":
                cluster.invalid_pods.append(PodResult(_pod_key(obj, where), None, f"invalid pod: {exc}"))
            else:
                cluster.errors.append(f"invalid {kind}: {exc}")
    if not cluster.nodes and not cluster.pods and not cluster.invalid_pods:
        cluster.errors.append(f"warning: {path}: no nodes, no pods")
    return cluster


def _duplicate(kind: str, name: str, first: str, second: str) -> str:
    return f"duplicate {kind} {name!r}: {second} repeats {first}; the first is kept"


def simulate(
    cluster: ClusterObjects, config: Configuration | None = None, seed: int = 0, *, shape_cache: bool = True
) -> SimulationResult:
    clock = ManualClock()
    starts = [t for p in cluster.pods if (t := parse_start_time(p.start_time)) is not None]
    base = max(starts, default=0.0) + 1.0  # simulated pods start after every recorded one
    binder = InMemoryBinder()
    outcomes: list[Outcome] = []
    engine = Scheduler(
        binder,
        config,
        clock=clock,
        wall_clock=lambda: base + clock.now(),
        seed=seed,
        run_binding=lambda task: task(),
        observer=outcomes.append,
        shape_cache=shape_cache,
    )
    result = SimulationResult(errors=list(cluster.errors))
    for node in cluster.nodes:
        engine.add_node(node)
    for topology in cluster.topologies:
        engine.update_topology(topology)
    for obj in cluster.dra:
        if isinstance(obj, DeviceClass):
            engine.dra.put_class(obj)
        elif isinstance(obj, ResourceSlice):
            engine.dra.put_slice(obj)
        else:
            engine.dra.put_claim(obj)
    pending: list[Pod] = []
    node_names = {node.name for node in cluster.nodes}
    for pod in cluster.pods:
        if pod.node_name and pod.node_name not in node_names:
            message = f"bound to node {pod.node_name!r}, which is not in the cluster"
            result.errors.append(f"{pod.source or pod.key}: pod {pod.key} is {message}")
            result.pods.append(PodResult(pod.key, pod.node_name, message))
            continue
        if pod.node_name or pod.phase in ("Succeeded", "Failed"):
            engine.add_pod(pod)
        elif engine.add_pod(pod):
            pending.append(pod)
        else:
            result.pods.append(
                PodResult(pod.key, None, f"skipped: no profile for schedulerName {pod.scheduler_name!r}")
            )
    _run(engine, clock, budget=100 * (len(pending) + 1))
    latest: dict[str, PodResult] = {}
    for outcome in outcomes:
        latest.setdefault(outcome.pod.key, PodResult(outcome.pod.key, None, ""))
        entry = latest[outcome.pod.key]
        entry.node, entry.message = outcome.node, outcome.message
        for victim in outcome.victims:
            line = f"{victim.key} preempted by {outcome.pod.key} on {outcome.nominated_node}"
            result.preemptions.append(line)
            result.preempted.append(victim.key)
            if victim.key in latest:
                latest[victim.key].node = None
                latest[victim.key].message = f"preempted by {outcome.pod.key} on {outcome.nominated_node}"
    result.pods[:0] = list(latest.values())
    result.pods.extend(cluster.invalid_pods)
    table = engine.cache.table
    for name, slot in sorted(table.slot.items()):
        node = table.node(slot)
        requested = {r: int(table.requested[table.row[r], slot]) for r in table.resources}
        shown = {r: v for r, v in requested.items() if v or r in node.allocatable}
        result.nodes[name] = NodeUsage(dict(node.allocatable), shown, _zones(engine, name))
    for key, claim in sorted(engine.dra.state.claims.items()):
        result.claims[key] = [f"{r.request} {'/'.join(r.device_id)}" for r in claim.allocation or ()]
    return result


def _zones(engine: Scheduler, node: str) -> dict[str, dict[str, tuple[int, int]]]:
    topology = engine.topologies.effective_for(node, [state.pod for state in engine.cache.pods_on(node)])
    if topology is None:
        return {}
    return {z.name: {r: (z.available.get(r, 0), t) for r, t in z.allocatable.items()} for z in topology.zones}


def _run(engine: Scheduler, clock: ManualClock, budget: int) -> None:
    for _ in range(budget):
        if engine.schedule_one() is not None:
            continue
        expiry = engine.queue.next_backoff_expiry()
        if expiry is None:
            return
        clock.set(max(expiry, clock.now()))
