"""Scheduling throughput of the engine in-process: 5,000 nodes, 10,000 pods.

Every pod goes through filter + score + assume with EVERY feasible node scored
(kubenode does not sample nodes as kube-scheduler's percentageOfNodesToScore does).
Binding is in memory and inline. Nodes have cpu, memory and kubenode.io/gpu (half of
them 8 GPUs, half none); a quarter of the pods ask for 1-4 GPUs. Prints pods scheduled
per second and peak memory.

The peer, measured in the same run: the same engine with its shape cache off
(scheduler/shapecache.py), the two alternated (A/B/A/B) so neighbours on a shared machine
weigh on both alike; the placements of every run must be identical. CPU time is the figure
to compare there (wall time depends on the neighbours), with the load average beside it.
The ratio to an older commit comes from benchmarks/ab_baseline.py.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from dataclasses import dataclass

from benchstats import peak_rss_mib, report

from kubenode.model.objects import Container, Node, Pod
from scheduler.clock import ManualClock
from scheduler.engine import Scheduler
from scheduler.simulate import InMemoryBinder

GIB = 2**30
GPU = "kubenode.io/gpu"


def make_nodes(count: int, rng: random.Random) -> list[Node]:
    nodes = []
    for i in range(count):
        allocatable = {
            "cpu": rng.choice((32_000, 64_000)),
            "memory": rng.choice((128, 256)) * GIB,
            "pods": 110,
        }
        if i % 2 == 0:
            allocatable[GPU] = 8
        nodes.append(Node(name=f"node-{i:05d}", labels={"zone": f"z{i % 3}"}, allocatable=allocatable))
    return nodes


def make_pods(count: int, rng: random.Random) -> list[Pod]:
    pods = []
    for i in range(count):
        requests = {
            "cpu": rng.choice((100, 250, 500, 1000, 2000)),
            "memory": rng.choice((256, 512, 1024, 4096)) * 2**20,
        }
        if i % 4 == 0:
            requests[GPU] = rng.randint(1, 4)
        container = Container(name="main", requests=requests, limits=requests)
        pods.append(Pod(name=f"pod-{i:05d}", priority=rng.choice((0, 100)), containers=(container,)))
    return pods


@dataclass
class Run:
    placements: list[str | None]
    elapsed: float
    cpu: float


def run_engine(node_count: int, pod_count: int, shape_cache: bool) -> Run:
    rng = random.Random(1)
    nodes, pods = make_nodes(node_count, rng), make_pods(pod_count, rng)
    engine = Scheduler(
        InMemoryBinder(),
        clock=ManualClock(),
        seed=1,
        run_binding=lambda task: task(),
        shape_cache=shape_cache,
    )
    for node in nodes:
        engine.add_node(node)
    for pod in pods:
        engine.add_pod(pod)
    placements = []
    start, cpu_start = time.perf_counter(), time.process_time()
    while (outcome := engine.schedule_one()) is not None:
        placements.append(outcome.node)
    return Run(placements, time.perf_counter() - start, time.process_time() - cpu_start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=2, help="A/B rounds of cached and uncached runs")
    args = parser.parse_args()
    cached: list[Run] = []
    plain: list[Run] = []
    for _ in range(args.rounds):
        cached.append(run_engine(args.nodes, args.pods, shape_cache=True))
        plain.append(run_engine(args.nodes, args.pods, shape_cache=False))
    if any(run.placements != plain[0].placements for run in cached + plain):
        raise SystemExit("scheduler_bench: the shape cache changed a placement")
    scheduled = sum(node is not None for node in cached[0].placements)
    elapsed = statistics.median(run.elapsed for run in cached)
    cpu = statistics.median(run.cpu for run in cached)
    plain_cpu = statistics.median(run.cpu for run in plain)
    load = os.getloadavg()[0]
    print(f"{args.nodes} nodes, {args.pods} pods, every feasible node scored; {scheduled} placed")
    print(f"median of {args.rounds} A/B rounds; placements identical with and without the shape cache")
    report("scheduler pods/s (filter+score+assume)", args.pods / elapsed, "pods/s", ">= 2000")
    # On a shared machine wall time depends on the neighbours; pods per CPU-second does not.
    report("scheduler pods per CPU-second", args.pods / cpu, "pods/s")
    report("scheduler pods per CPU-second, shape cache off", args.pods / plain_cpu, "pods/s")
    report("scheduler CPU-second ratio, cache off / on", plain_cpu / cpu, "x")
    report("scheduler mean latency per pod", elapsed / args.pods * 1000, "ms")
    report("scheduler peak RSS", peak_rss_mib(), "MiB")
    report("load average (1 min) at the end", load, "")


if __name__ == "__main__":
    main()
