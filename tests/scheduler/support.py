"""Small builders for scheduler tests."""

from __future__ import annotations

from collections.abc import Mapping

from kubenode.model.objects import Container, Node, Pod, Taint, Toleration
from scheduler.clock import ManualClock
from scheduler.engine import Scheduler
from scheduler.profile import Configuration

GIB = 2**30
GPU = "kubenode.io/gpu"


def node(
    name: str,
    alloc: Mapping[str, int],
    taints: tuple[Taint, ...] = (),
    labels: Mapping[str, str] | None = None,
) -> Node:
    """A node with these allocatable amounts (pods defaults to 110)."""
    return Node(name, labels=dict(labels or {}), taints=taints, allocatable={"pods": 110, **alloc})


def pod(
    name: str,
    requests: Mapping[str, int] | None = None,
    priority: int = 0,
    node_name: str = "",
    tolerations: tuple[Toleration, ...] = (),
    start_time: str = "",
    preemption_policy: str = "PreemptLowerPriority",
) -> Pod:
    container = Container("main", requests=dict(requests or {}), limits=dict(requests or {}))
    return Pod(
        name,
        priority=priority,
        node_name=node_name,
        containers=(container,),
        tolerations=tolerations,
        start_time=start_time,
        preemption_policy=preemption_policy,
    )


class RecordingBinder:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.bound: list[tuple[str, str]] = []
        self.evicted: list[str] = []

    def bind(self, pod: Pod, node: str) -> None:
        if self.fail:
            raise RuntimeError("apiserver said no")
        self.bound.append((pod.key, node))

    def evict(self, victim: Pod, preemptor: Pod, node: str) -> None:
        self.evicted.append(victim.key)


def engine(
    binder: RecordingBinder | None = None, config: Configuration | None = None, seed: int = 0
) -> tuple[Scheduler, ManualClock, RecordingBinder]:
    clock = ManualClock()
    binder = binder or RecordingBinder()
    scheduler = Scheduler(
        binder, config, clock=clock, wall_clock=clock.now, seed=seed, run_binding=lambda t: t()
    )
    return scheduler, clock, binder
