"""Scheduling profiles: a subset of kube-scheduler's KubeSchedulerConfiguration (v1).

Supported: `podInitialBackoffSeconds`, `podMaxBackoffSeconds`, and per profile
(`schedulerName`) the score plugins' weights (`plugins.score.enabled/disabled`) and the
args of NodeResourcesFit (`scoringStrategy`, `ignoredResources`,
`ignoredResourceGroups`) and NodeResourcesBalancedAllocation (`resources`). Several
profiles let, for example, a GPU pool bin-pack (MostAllocated over kubenode.io/gpu)
while everything else spreads. The top-level `extenders` list (kube's field names, see
scheduler.extender_config) names HTTP extenders every profile calls; their resources
with `ignoredByScheduler` join each profile's ignoredResources. Anything else in the
file is rejected with the file and field named, rather than silently ignored.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from kubenode import yamlload
from kubenode.model.errors import ValidationError
from kubenode.model.fields import Fields
from kubenode.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    is_extended_resource_name,
    is_native_resource,
)
from scheduler.extender_config import ExtenderConfig, parse_extenders

FIT = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
AFFINITY = "NodeAffinity"
TAINTS = "TaintToleration"
NUMA = "NodeResourceTopologyMatch"  # kubenode's NUMA-aware plugin (scheduler/numa.py)

# kube-scheduler's default score plugins and weights (apis/config/v1/default_plugins.go), and kubenode's
# NodeResourceTopologyMatch (it scores only pods asking for resources that nodes publish per NUMA zone).
DEFAULT_WEIGHTS: Mapping[str, int] = {TAINTS: 3, AFFINITY: 2, FIT: 1, BALANCED: 1, NUMA: 1}
# Default score plugins kubenode has no inputs for (no images, topology spread or
# inter-pod affinity): they may be disabled in a profile but not enabled.
UNSUPPORTED_SCORE_PLUGINS = frozenset(
    {"ImageLocality", "PodTopologySpread", "InterPodAffinity", "VolumeBinding"}
)

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
DEFAULT_SCHEDULER_NAME = "default-scheduler"


@dataclass(frozen=True)
class ResourceWeight:
    name: str
    weight: int = 1


@dataclass(frozen=True)
class ShapePoint:
    utilization: int  # 0..100
    score: int  # 0..10


@dataclass(frozen=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceWeight, ...] = (ResourceWeight(CPU), ResourceWeight(MEMORY))
    shape: tuple[ShapePoint, ...] = ()


@dataclass(frozen=True)
class Profile:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    # Enabled score plugins and their weights.
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    scoring: ScoringStrategy = ScoringStrategy()
    balanced_resources: tuple[ResourceWeight, ...] = (ResourceWeight(CPU), ResourceWeight(MEMORY))
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()

    def ignores(self, resource: str) -> bool:
        """NodeResourcesFit skips these extended resources in its filter."""
        if not is_extended_resource_name(resource):
            return False
        return resource in self.ignored_resources or resource.split("/", 1)[0] in self.ignored_resource_groups


@dataclass(frozen=True)
class Configuration:
    profiles: Mapping[str, Profile] = field(default_factory=lambda: {DEFAULT_SCHEDULER_NAME: Profile()})
    initial_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 10.0
    extenders: tuple[ExtenderConfig, ...] = ()  # called by every profile, as kube's top-level list


def _bounded(reader: Fields, key: str, default: int, low: int, high: int) -> int:
    value = reader.data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise reader.error(key, f"must be an integer in {low}..{high}, got {value!r}")
    return value


def _resource_name(reader: Fields) -> str:
    name = reader.string("name")
    scorable = name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_extended_resource_name(name)
    if not scorable and not (is_native_resource(name) and name.startswith("hugepages-")):
        raise reader.error(
            "name",
            f"unknown resource {name!r} (use cpu, memory, ephemeral-storage, hugepages-<size> "
            "or an extended resource such as kubenode.io/gpu)",
        )
    return name


def _resource_weights(reader: Fields, key: str) -> tuple[ResourceWeight, ...] | None:
    if key not in reader.data:
        return None
    items = reader.children(key, allowed=("name", "weight"))
    if not items:
        raise reader.error(key, "must list at least one resource")
    result = tuple(ResourceWeight(_resource_name(r), _bounded(r, "weight", 1, 1, 100)) for r in items)
    names = [r.name for r in result]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise reader.error(key, f"resource {duplicate!r} listed twice")
    return result


def _shape(reader: Fields) -> tuple[ShapePoint, ...]:
    points = reader.children("shape", allowed=("utilization", "score"))
    if not points:
        raise reader.error("shape", "RequestedToCapacityRatio needs at least one shape point")
    shape = tuple(
        ShapePoint(_bounded(p, "utilization", 0, 0, 100), _bounded(p, "score", 0, 0, 10)) for p in points
    )
    for before, after in itertools.pairwise(shape):
        if after.utilization <= before.utilization:
            raise reader.error("shape", "utilization values must be strictly increasing")
    return shape


def _scoring_strategy(reader: Fields) -> ScoringStrategy:
    kind = reader.string("type", LEAST_ALLOCATED)
    if kind not in STRATEGIES:
        raise reader.error("type", f"must be one of {', '.join(STRATEGIES)}, got {kind!r}")
    resources = _resource_weights(reader, "resources") or ScoringStrategy().resources
    shape: tuple[ShapePoint, ...] = ()
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        shape = _shape(reader.child("requestedToCapacityRatio", allowed=("shape",)))
    elif "requestedToCapacityRatio" in reader.data:
        raise reader.error(
            "requestedToCapacityRatio", f"only allowed with type {REQUESTED_TO_CAPACITY_RATIO}"
        )
    return ScoringStrategy(kind, resources, shape)


def _weights(plugins: Fields) -> dict[str, int]:
    score = plugins.child("score", allowed=("enabled", "disabled"))
    weights = dict(DEFAULT_WEIGHTS)
    for entry in score.children("disabled", allowed=("name",)):
        name = entry.string("name")
        if name == "*":
            weights.clear()
        elif name in DEFAULT_WEIGHTS or name in UNSUPPORTED_SCORE_PLUGINS:
            weights.pop(name, None)
        else:
            raise entry.error("name", f"unknown score plugin {name!r}")
    for entry in score.children("enabled", allowed=("name", "weight")):
        name = entry.string("name")
        if name not in DEFAULT_WEIGHTS:
            raise entry.error(
                "name", f"unsupported score plugin {name!r} (supported: {', '.join(DEFAULT_WEIGHTS)})"
            )
        weights[name] = _bounded(entry, "weight", DEFAULT_WEIGHTS[name], 1, 100)
    return weights


def _profile(reader: Fields) -> Profile:
    name = reader.string("schedulerName", DEFAULT_SCHEDULER_NAME)
    weights = _weights(reader.child("plugins", allowed=("score",)))
    profile = Profile(scheduler_name=name, weights=weights)
    for entry in reader.children("pluginConfig", allowed=("name", "args")):
        plugin = entry.string("name")
        if plugin == FIT:
            args = entry.child(
                "args", allowed=("scoringStrategy", "ignoredResources", "ignoredResourceGroups")
            )
            strategy = args.child(
                "scoringStrategy", allowed=("type", "resources", "requestedToCapacityRatio")
            )
            profile = replace(
                profile,
                scoring=_scoring_strategy(strategy),
                ignored_resources=frozenset(args.strings("ignoredResources")),
                ignored_resource_groups=frozenset(args.strings("ignoredResourceGroups")),
            )
        elif plugin == BALANCED:
            args = entry.child("args", allowed=("resources",))
            balanced = _resource_weights(args, "resources") or profile.balanced_resources
            profile = replace(profile, balanced_resources=balanced)
        else:
            raise entry.error(
                "name", f"no supported args for plugin {plugin!r} (supported: {FIT}, {BALANCED})"
            )
    return profile


def parse_configuration(data: Any, source: str) -> Configuration:
    """A Configuration from a decoded KubeSchedulerConfiguration; ValidationError names source and field."""
    top = Fields(
        source,
        "",
        data,
        allowed=(
            "apiVersion",
            "kind",
            "profiles",
            "podInitialBackoffSeconds",
            "podMaxBackoffSeconds",
            "extenders",
        ),
    )
    kind = top.string("kind", "KubeSchedulerConfiguration")
    if kind != "KubeSchedulerConfiguration":
        raise top.error("kind", f"expected KubeSchedulerConfiguration, got {kind!r}")
    api_version = top.string("apiVersion", "kubescheduler.config.k8s.io/v1")
    if not api_version.startswith("kubescheduler.config.k8s.io/"):
        raise top.error("apiVersion", f"expected kubescheduler.config.k8s.io/v1, got {api_version!r}")
    initial = _bounded(top, "podInitialBackoffSeconds", 1, 1, 3600)
    maximum = _bounded(top, "podMaxBackoffSeconds", 10, 1, 3600)
    if maximum < initial:
        raise top.error("podMaxBackoffSeconds", "must be at least podInitialBackoffSeconds")
    profiles: dict[str, Profile] = {}
    for entry in top.children("profiles", allowed=("schedulerName", "plugins", "pluginConfig")):
        profile = _profile(entry)
        if profile.scheduler_name in profiles:
            raise entry.error("schedulerName", f"duplicate profile {profile.scheduler_name!r}")
        profiles[profile.scheduler_name] = profile
    extenders = parse_extenders(top)
    # Resources an extender manages with ignoredByScheduler: NodeResourcesFit leaves them to it.
    left_to_extenders = frozenset().union(*(e.ignored_resources for e in extenders))
    profiles = {
        name: replace(p, ignored_resources=p.ignored_resources | left_to_extenders)
        for name, p in (profiles or {DEFAULT_SCHEDULER_NAME: Profile()}).items()
    }
    return Configuration(profiles, float(initial), float(maximum), extenders)


def load_configuration(path: Path) -> Configuration:
    try:
        data = yamlload.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValidationError(str(path), "", f"cannot read profile: {exc}") from None
    return parse_configuration(data, str(path))
