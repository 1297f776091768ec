"""The eviction manager's decisions with injected signals, clock and pods: thresholds, conditions, ranking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from agent.eviction.manager import EvictionManager, PodUsage
from agent.eviction.signals import Observation
from agent.eviction.thresholds import DEFAULT_HARD, parse_duration, parse_thresholds
from kubenode.model import Container, Pod

Mi = 2**20


def pod(
    name: str,
    priority: int = 0,
    requests: Mapping[str, int] | None = None,
    limits: Mapping[str, int] | None = None,
) -> Pod:
    return Pod(
        name=name,
        uid=name,
        priority=priority,
        source="api",
        containers=(Container("main", requests=dict(requests or {}), limits=dict(limits or {})),),
    )


class Target:
    def __init__(self, usages: list[PodUsage]) -> None:
        self.usages = usages
        self.evicted: list[tuple[str, str, int | None]] = []
        self.reclaimable = 0
        self.measured: list[str] = []

    def eviction_candidates(self) -> list[PodUsage]:
        gone = {name for name, _, _ in self.evicted}
        return [u for u in self.usages if u.pod.name not in gone]

    def measure(self, candidates: Sequence[PodUsage], resource: str) -> None:
        self.measured.append(resource)  # the usages hold every figure already

    def evict_pod(self, pod: Pod, message: str, grace_override: int | None) -> None:
        self.evicted.append((pod.name, message, grace_override))

    def reclaim_dead_container_logs(self) -> int:
        freed, self.reclaimable = self.reclaimable, 0
        return freed


def manager(
    target: Target, signals: dict[str, Observation], thresholds: Any, clock: list[float]
) -> EvictionManager:
    return EvictionManager(
        target, thresholds, lambda _: signals, transition_period=300, clock=lambda: clock[0]
    )


def test_thresholds_parse_as_the_kubelet_writes_them() -> None:
    hard = {str(t) for t in parse_thresholds(DEFAULT_HARD)}
    assert hard == {
        "memory.available<104857600",
        "nodefs.available<10%",
        "nodefs.inodesFree<5%",
        "imagefs.available<15%",
    }
    soft = parse_thresholds("", "memory.available<1Gi", "memory.available=1m30s", "memory.available=100Mi")
    assert soft[0].soft and soft[0].grace_period == 90 and soft[0].min_reclaim == 100 * Mi
    assert parse_thresholds({"nodefs.available": "5%"})[0].percent == 5  # the config file's mapping
    assert parse_duration("1h2m3s") == 3723
    for bad, match in [
        ("disk.available<1Gi", "unknown eviction signal 'disk.available'"),
        ("memory.available<lots", "memory.available"),
        ("nodefs.available<120%", "between 0% and 100%"),
        ("memory.available", "is not signal<value"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_thresholds(bad)
    with pytest.raises(ValueError, match="no grace period"):
        parse_thresholds("", "memory.available<1Gi")


def test_disk_pressure_evicts_one_pod_per_round_best_effort_first_and_sets_the_condition() -> None:
    best_effort = PodUsage(pod("be"), disk=5 * Mi)
    guaranteed = PodUsage(
        pod("g", requests={"ephemeral-storage": 50 * Mi}, limits={"ephemeral-storage": 50 * Mi}), disk=20 * Mi
    )
    critical = PodUsage(pod("static"), disk=500 * Mi, critical=True)
    target = Target([guaranteed, best_effort, critical])
    clock = [0.0]
    signals = {"nodefs.available": Observation(10 * Mi, 100 * Mi)}
    m = manager(target, signals, parse_thresholds("nodefs.available<99%"), clock)
    assert m.synchronize() is not None
    assert [name for name, _, _ in target.evicted] == ["be"]  # over its (zero) request: first
    _, message, grace = target.evicted[0]
    assert message.startswith("The node was low on resource: ephemeral-storage. Threshold quantity: ")
    assert grace == 0  # a hard threshold: no grace
    assert m.pressure() == {"DiskPressure": True}
    m.synchronize()
    assert [name for name, _, _ in target.evicted] == ["be", "g"]  # the critical static pod never goes
    m.synchronize()
    assert len(target.evicted) == 2
    # Pressure ends, and the condition stays for the transition period after it was last seen.
    signals["nodefs.available"] = Observation(100 * Mi, 100 * Mi)
    clock[0] = 100
    m.synchronize()
    assert m.pressure() == {"DiskPressure": True}
    clock[0] = 301
    assert m.pressure() == {"DiskPressure": False}


def test_memory_ranks_by_usage_over_requests_then_priority() -> None:
    within = PodUsage(pod("within", requests={"memory": 100 * Mi}), memory=50 * Mi)
    over_important = PodUsage(pod("over-hi", priority=1000), memory=30 * Mi)
    over = PodUsage(pod("over", requests={"memory": 10 * Mi}), memory=40 * Mi)
    target = Target([within, over_important, over])
    signals = {"memory.available": Observation(50 * Mi, 1024 * Mi)}
    m = manager(target, signals, parse_thresholds("memory.available<100Mi"), [0.0])
    for _ in range(3):
        m.synchronize()
    assert [name for name, _, _ in target.evicted] == ["over", "over-hi", "within"]
    assert (
        "Container main was using 40Mi, request is 10Mi, has larger consumption of memory."
        in target.evicted[0][1]
    )
    assert target.measured == ["memory"] * 3  # each round read the pods' memory before ranking them


def test_a_round_with_no_threshold_met_reads_no_pods_usage() -> None:
    target = Target([PodUsage(pod("a"), memory=Mi)])
    signals = {"memory.available": Observation(900 * Mi, 1024 * Mi)}
    m = manager(target, signals, parse_thresholds("memory.available<100Mi"), [0.0])
    assert m.synchronize() is None
    assert target.measured == []


def test_soft_thresholds_wait_for_their_grace_and_minimum_reclaim_holds_pressure() -> None:
    target = Target([PodUsage(pod("a"), memory=Mi)])
    clock = [0.0]
    signals = {"memory.available": Observation(90 * Mi, 1024 * Mi)}
    m = EvictionManager(
        target,
        parse_thresholds("", "memory.available<100Mi", "memory.available=30s", "memory.available=50Mi"),
        lambda _: signals,
        max_pod_grace_period=7,
        clock=lambda: clock[0],
    )
    m.synchronize()
    clock[0] = 29
    m.synchronize()
    assert target.evicted == []
    clock[0] = 31
    m.synchronize()
    assert [(n, g) for n, _, g in target.evicted] == [("a", 7)]
    # Above the threshold but below threshold + minimum reclaim: still met.
    signals["memory.available"] = Observation(120 * Mi, 1024 * Mi)
    m.synchronize()
    assert m._last_met


def test_a_pod_over_its_ephemeral_storage_limit_is_evicted_with_kubes_message() -> None:
    over = PodUsage(
        pod("over", limits={"ephemeral-storage": 10 * Mi}), disk=11 * Mi, container_disk={"main": 11 * Mi}
    )
    vol = PodUsage(pod("vol"), disk=3 * Mi, empty_dirs={"scratch": (3 * Mi, 2 * Mi)})
    fine = PodUsage(pod("fine", limits={"ephemeral-storage": 10 * Mi}), disk=Mi)
    target = Target([over, vol, fine])
    m = manager(target, {}, [], [0.0])
    m.synchronize()
    messages = {name: message for name, message, _ in target.evicted}
    assert messages == {
        "over": "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi.",
        "vol": "Usage of EmptyDir volume 'scratch' exceeds the limit '2Mi'.",
    }
