"""NUMA-aware filtering and scoring from NodeResourceTopology objects (beyond kube-scheduler, in the
manner of kubernetes-sigs/scheduler-plugins' NodeResourceTopologyMatch).

A node publishes, per NUMA zone, the allocatable and available devices of each resource, with its
Topology Manager policy and scope, and the pods already accounted for (`kubenode.io/pods`).
`place(topology, pod)` replays what that node's Topology Manager would do with the pod: per merge
unit (each container in the container scope, init containers first; the whole pod in the pod scope)
and each resource the zones carry, the masks of zones whose available devices cover the request,
preferred when as narrow as the node's devices (capacity: healthy or not, as the kubelet counts)
allow; restricted admits only a mask preferred by every resource, single-numa-node only one such zone;
best-effort and none always admit. The admitted
unit's devices are taken from its mask (then from other zones), so the next unit sees them gone.
It returns the topology after the pod, or the refusal ("cannot align container", as the plugin says).

The filter runs `place` on each otherwise feasible node over its effective topology: the published
one with every pod the scheduler placed there that it does not account for yet replayed on top. The
score (LeastNUMANodes) is 100 - 12 per NUMA zone of the pod's widest unit; nodes that publish no
topology score 0, and pods that ask for no zoned resource leave the plugin out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

from kubenode.model.objects import Container, Pod
from kubenode.model.quantity import QuantityError, to_amount

PLUGIN = "NodeResourceTopologyMatch"
POLICY_ATTRIBUTE = "topologyManagerPolicy"
SCOPE_ATTRIBUTE = "topologyManagerScope"
PODS_ATTRIBUTE = "kubenode.io/pods"
NONE, BEST_EFFORT, RESTRICTED, SINGLE = "none", "best-effort", "restricted", "single-numa-node"
CONTAINER, POD = "container", "pod"
MAX_NODE_SCORE = 100
HIGHEST_NUMA_ID = 8  # scheduler-plugins' LeastNUMANodes: each NUMA node costs MaxNodeScore / 8
# The legacy topologyPolicies values (v1alpha1), for objects without the attributes.
LEGACY_POLICIES = {
    "SingleNUMANodeContainerLevel": (SINGLE, CONTAINER),
    "SingleNUMANodePodLevel": (SINGLE, POD),
    "RestrictedContainerLevel": (RESTRICTED, CONTAINER),
    "RestrictedPodLevel": (RESTRICTED, POD),
    "Restricted": (RESTRICTED, CONTAINER),
    "BestEffortContainerLevel": (BEST_EFFORT, CONTAINER),
    "BestEffortPodLevel": (BEST_EFFORT, POD),
    "BestEffort": (BEST_EFFORT, CONTAINER),
    "None": (NONE, CONTAINER),
}


class TopologyError(ValueError):
    pass


@dataclass(frozen=True)
class Zone:
    name: str
    allocatable: Mapping[str, int]
    available: Mapping[str, int]
    # Every device, healthy or not: the kubelet measures "as narrow as possible" against these.
    capacity: Mapping[str, int] | None = None


@dataclass(frozen=True)
class NodeTopology:
    node: str
    policy: str = NONE
    scope: str = CONTAINER
    zones: tuple[Zone, ...] = ()
    accounted: frozenset[str] = frozenset()  # pods (namespace/name) the availability already reflects

    @property
    def resources(self) -> frozenset[str]:
        return frozenset(r for z in self.zones for r in z.allocatable)


@dataclass(frozen=True)
class Placement:
    topology: NodeTopology | None  # the topology after the pod; None when refused
    reason: str = ""
    widest: int = 0  # NUMA zones of the pod's widest merge unit


def _attributes(items: Any, where: str) -> dict[str, str]:
    if not isinstance(items, list):
        return {}
    out = {}
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise TopologyError(f"{where}[{i}]: an attribute needs a name")
        out[item["name"]] = str(item.get("value", ""))
    return out


def parse_node_topology(obj: Mapping[str, Any], where: str = "") -> NodeTopology:
    """A NodeResourceTopology object (API or cluster file); TopologyError names the field."""
    prefix = f"{where}: " if where else ""
    name = str((obj.get("metadata") or {}).get("name") or obj.get("name") or "")
    if not name:
        raise TopologyError(f"{prefix}metadata.name is required")
    attributes = _attributes(obj.get("attributes"), f"{prefix}attributes")
    policy, scope = NONE, CONTAINER
    legacy = obj.get("topologyPolicies") or []
    if isinstance(legacy, list) and legacy and legacy[0] in LEGACY_POLICIES:
        policy, scope = LEGACY_POLICIES[legacy[0]]
    policy = attributes.get(POLICY_ATTRIBUTE, policy)
    scope = attributes.get(SCOPE_ATTRIBUTE, scope)
    if policy not in (NONE, BEST_EFFORT, RESTRICTED, SINGLE):
        raise TopologyError(f"{prefix}attributes {POLICY_ATTRIBUTE}: unknown policy {policy!r}")
    if scope not in (CONTAINER, POD):
        raise TopologyError(f"{prefix}attributes {SCOPE_ATTRIBUTE}: unknown scope {scope!r}")
    zones = []
    for i, zone in enumerate(obj.get("zones") or []):
        here = f"{prefix}zones[{i}]"
        if not isinstance(zone, Mapping) or not zone.get("name"):
            raise TopologyError(f"{here}.name is required")
        allocatable, available, capacity = {}, {}, {}
        for j, res in enumerate(zone.get("resources") or []):
            if not isinstance(res, Mapping) or not res.get("name"):
                raise TopologyError(f"{here}.resources[{j}].name is required")
            rname = str(res["name"])
            try:
                allocatable[rname] = to_amount(rname, res.get("allocatable", res.get("capacity", 0)))
                available[rname] = to_amount(rname, res.get("available", res.get("allocatable", 0)))
                capacity[rname] = to_amount(rname, res.get("capacity", res.get("allocatable", 0)))
            except QuantityError as err:
                raise TopologyError(f"{here}.resources[{j}]: {err}") from None
        zones.append(Zone(str(zone["name"]), allocatable, available, capacity))
    pods = attributes.get(PODS_ATTRIBUTE, "")
    accounted = frozenset(p for p in pods.split(",") if p)
    return NodeTopology(name, policy, scope, tuple(zones), accounted)


# --- replaying the node's Topology Manager ------------------------------------------------------

Masks = list[tuple[int, ...]]


@dataclass
class _Zones:
    """Mutable availability while one pod is placed."""

    allocatable: list[Mapping[str, int]]
    available: list[dict[str, int]] = field(default_factory=list)

    def fits(self, mask: Iterable[int], resource: str, amount: int, *, total: bool = False) -> bool:
        source = self.allocatable if total else self.available
        return sum(source[z].get(resource, 0) for z in mask) >= amount


def _masks(count: int) -> Masks:
    return [m for width in range(1, count + 1) for m in combinations(range(count), width)]


def _preferred(zones: _Zones, masks: Masks, resource: str, amount: int) -> set[tuple[int, ...]]:
    """The masks the node would prefer for this resource (kube's device hints, preferred ones)."""
    narrowest = next(
        (len(m) for m in masks if zones.fits(m, resource, amount, total=True)), len(zones.allocatable)
    )
    return {m for m in masks if len(m) == narrowest and zones.fits(m, resource, amount)}


def _place_unit(
    zones: _Zones, masks: Masks, policy: str, requests: Mapping[str, int]
) -> tuple[int, ...] | None:
    """The mask one merge unit gets, or None when the policy refuses it; its devices are taken."""
    if not requests:
        return ()
    common: set[tuple[int, ...]] | None = None
    for resource, amount in requests.items():
        preferred = _preferred(zones, masks, resource, amount)
        common = preferred if common is None else common & preferred
    aligned = sorted(common or (), key=lambda m: (len(m), sum(1 << z for z in m)))
    if policy == SINGLE:
        aligned = [m for m in aligned if len(m) == 1]
    if not aligned and policy in (RESTRICTED, SINGLE):
        return None
    if aligned and policy != NONE:
        mask = aligned[0]
    else:  # best-effort without a preferred mask, or none: the narrowest mask where everything fits
        mask = next(
            (m for m in masks if all(zones.fits(m, r, a) for r, a in requests.items())),
            tuple(range(len(zones.available))),
        )
    for resource, amount in requests.items():
        order = list(mask) + [z for z in range(len(zones.available)) if z not in mask]
        for z in order:
            take = min(amount, zones.available[z].get(resource, 0))
            zones.available[z][resource] = zones.available[z].get(resource, 0) - take
            amount -= take
    return mask


def _zoned(requests: Mapping[str, int], resources: frozenset[str]) -> dict[str, int]:
    return {r: a for r, a in requests.items() if a > 0 and r in resources}


def _container_requests(container: Container) -> Mapping[str, int]:
    return {**container.requests, **container.limits}


def place(topology: NodeTopology, pod: Pod) -> Placement:
    """What the node's Topology Manager would do with the pod (see the module docstring)."""
    resources = topology.resources
    zones = _Zones(
        [z.allocatable if z.capacity is None else z.capacity for z in topology.zones],
        [dict(z.available) for z in topology.zones],
    )
    masks = _masks(len(topology.zones))
    if topology.scope == POD:
        units = [("pod", _zoned({**pod.requests, **pod.limits}, resources), True)]
    else:
        units = [
            ("init container", _zoned(_container_requests(c), resources), False) for c in pod.init_containers
        ]
        units += [("container", _zoned(_container_requests(c), resources), True) for c in pod.containers]
    widest = 0
    for kind, requests, keeps in units:
        trial = zones if keeps else _Zones(zones.allocatable, [dict(a) for a in zones.available])
        mask = _place_unit(trial, masks, topology.policy, requests)
        if mask is None:
            return Placement(None, f"cannot align {kind}")
        widest = max(widest, len(mask))
    placed = tuple(replace(z, available=a) for z, a in zip(topology.zones, zones.available, strict=True))
    return Placement(replace(topology, zones=placed, accounted=topology.accounted | {pod.key}), "", widest)


def requests_zoned(pod: Pod, resources: frozenset[str]) -> bool:
    """Whether the pod asks for any resource some zone carries (else the plugin stays out)."""
    return any(
        amount > 0 and name in resources
        for c in pod.all_containers
        for name, amount in _container_requests(c).items()
    )


def effective(topology: NodeTopology, pods: Iterable[Pod]) -> NodeTopology:
    """The published topology with the pods it does not account for yet replayed on top (in order)."""
    for pod in pods:
        if pod.key in topology.accounted or not requests_zoned(pod, topology.resources):
            continue
        placed = place(topology, pod).topology
        if placed is not None:
            topology = placed
    return topology


def least_numa_score(placement: Placement) -> int:
    if placement.topology is None:
        return 0
    return MAX_NODE_SCORE - placement.widest * (MAX_NODE_SCORE // HIGHEST_NUMA_ID)
