"""The shape cache (scheduler/shapecache.py) changes no placement: the engine with and without it
on the benchmark's cluster (scheduler_bench's generator, smaller) and on every example cluster
under every example profile."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kubenode.model.objects import Container, Node, Pod, Taint, Toleration
from scheduler.clock import ManualClock
from scheduler.engine import Scheduler
from scheduler.profile import load_configuration
from scheduler.simulate import InMemoryBinder, read_cluster, simulate

ROOT = Path(__file__).parents[2]
CLUSTERS = sorted((ROOT / "examples" / "clusters").iterdir())
PROFILES = [None, *sorted((ROOT / "examples" / "profiles").iterdir())]


def bench_module() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))  # scheduler_bench imports benchstats beside it
    try:
        spec = importlib.util.spec_from_file_location(
            "scheduler_bench", ROOT / "benchmarks" / "scheduler_bench.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.mark.parametrize(("node_count", "pod_count"), [(500, 2000), (60, 1500)])
def test_benchmark_cluster_places_every_pod_as_without_the_cache(node_count: int, pod_count: int) -> None:
    bench = bench_module()
    cached = bench.run_engine(node_count, pod_count, shape_cache=True).placements
    plain = bench.run_engine(node_count, pod_count, shape_cache=False).placements
    assert len(cached) == pod_count
    assert cached == plain
    if node_count == 60:  # the small cluster fills up: failures match too
        assert None in cached


def test_nodes_changing_between_pods_of_one_shape() -> None:
    """Taints, removals and new nodes between pods of an equal shape (slots reused, new resources)."""
    gpu = "kubenode.io/gpu"
    runs = []
    for shape_cache in (True, False):
        engine = Scheduler(
            InMemoryBinder(),
            clock=ManualClock(),
            seed=3,
            run_binding=lambda task: task(),
            shape_cache=shape_cache,
        )
        placed: list[tuple[str, str | None, str]] = []
        for i in range(12):
            engine.add_node(
                Node(name=f"n{i}", allocatable={"cpu": 4000 + 500 * i, "memory": 2**33, "pods": 110})
            )
        for step in range(60):
            requests = {"cpu": 500, "memory": 2**28} if step % 3 else {"cpu": 500, "memory": 2**28, gpu: 1}
            pod = Pod(
                name=f"p{step}",
                containers=(Container(name="c", requests=requests, limits=requests),),
                tolerations=(Toleration(key="soft", operator="Exists"),) if step % 2 else (),
            )
            engine.add_pod(pod)
            if step == 10:
                engine.add_node(
                    Node(name="g0", allocatable={"cpu": 8000, "memory": 2**33, "pods": 110, gpu: 2})
                )
            if step == 20:
                engine.remove_node("n3")
            if step == 25:
                taint = Taint("soft", "NoSchedule")
                engine.update_node(
                    Node(name="n5", allocatable={"cpu": 9000, "memory": 2**33, "pods": 110}, taints=(taint,))
                )
            if step == 30:
                engine.add_node(Node(name="n3", allocatable={"cpu": 16000, "memory": 2**34, "pods": 110}))
            if step == 40:
                taint = Taint("pref", "PreferNoSchedule")
                engine.update_node(
                    Node(name="n7", allocatable={"cpu": 9000, "memory": 2**33, "pods": 110}, taints=(taint,))
                )
            while (outcome := engine.schedule_one()) is not None:
                placed.append((outcome.pod.key, outcome.node, outcome.message))
        runs.append(placed)
    assert runs[0] == runs[1]
    assert any(node == "g0" for _, node, _ in runs[0])


@pytest.mark.parametrize("cluster", CLUSTERS, ids=lambda path: path.name)
@pytest.mark.parametrize("profile", PROFILES, ids=lambda path: path.name if path else "default")
def test_examples_place_every_pod_as_without_the_cache(cluster: Path, profile: Path | None) -> None:
    config = load_configuration(profile) if profile else None
    with_cache = simulate(read_cluster(cluster), config, shape_cache=True)
    without = simulate(read_cluster(cluster), config, shape_cache=False)
    assert with_cache.pods == without.pods
    assert with_cache.nodes == without.nodes
    assert with_cache.preemptions == without.preemptions
