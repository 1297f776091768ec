"""DRA in the scheduler, in-process: pods/s with one ResourceClaim each against the same pods asking for an
extended resource, and the time to evaluate one CEL selector on one device.

Throughput: 500 nodes with 8 devices each (one node-local ResourceSlice per node, one DeviceClass
selecting the driver by CEL); 2,000 pods, each with its own claim for one device (with a CEL
selector on the device's memory capacity), go through the engine (PreEnqueue, filters,
DynamicResources on every feasible node, Reserve, PreBind writing the claim status in memory).
The peer, in the same run: 2,000 pods asking for `example.com/gpu: 1` on the same 500 nodes with
allocatable 8. Both settle the heap after setup as the live scheduler does (gc.freeze and its
thresholds, scheduler/runner.py). Runs alternate (A/B/A/B); the ratio is of the medians of CPU time (wall time
depends on the neighbours on a shared machine). This is the engine alone: the live path
(informers, claim status written over HTTP to our API server, which serves resource.k8s.io/v1)
is measured by benchmarks/dra_live_bench.py.

The first pods pay for evaluating the selectors on every device once (4,000 devices here); the
ratio after the first 100 pods is printed too.

Selector: the p50 of single evaluations of a class-plus-request style selector on one device
(cached compiled program, the device's prebuilt activation), as the allocator calls it.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from dataclasses import dataclass
from typing import Any

from benchstats import percentile, report

from kubenode.dra.cel import DeviceData, compile_selector
from kubenode.dra.types import parse_device_class, parse_resource_claim, parse_resource_slice
from kubenode.model.objects import Container, Node, Pod
from scheduler.clock import ManualClock
from scheduler.engine import Scheduler
from scheduler.runner import settle_heap
from scheduler.simulate import InMemoryBinder

DRIVER = "gpu.example.com"
EXTENDED = "example.com/gpu"
SELECTOR = (
    f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].model == 'A100' && "
    f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"
)


def slice_object(node: str, devices: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"model": {"string": "A100"}, "index": {"int": i}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(devices)
            ],
        },
    }


def claim_object(name: str) -> dict[str, Any]:
    request = {
        "name": "gpu",
        "exactly": {
            "deviceClassName": DRIVER,
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"
                    }
                }
            ],
        },
    }
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [request]}},
    }


def claim_pod(i: int) -> Pod:
    name = f"pod-{i:05d}"
    raw = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": f"claim-{i:05d}"}]},
    }
    container = Container("main", requests={"cpu": 100}, limits={"cpu": 100})
    return Pod(name, uid=f"uid-{name}", containers=(container,), raw=raw)


def extended_pod(i: int) -> Pod:
    requests = {"cpu": 100, EXTENDED: 1}
    return Pod(f"pod-{i:05d}", containers=(Container("main", requests=requests, limits=requests),))


@dataclass
class Run:
    placed: int
    elapsed: float
    cpu: float
    warm_cpu: float  # CPU time after the first WARMUP pods (the selector verdicts are cached by then)


WARMUP = 100
DEFAULT_GC_THRESHOLDS = gc.get_threshold()


def run(nodes: int, devices: int, pods: int, dra: bool) -> Run:
    engine = Scheduler(InMemoryBinder(), clock=ManualClock(), seed=1, run_binding=lambda task: task())
    for i in range(nodes):
        allocatable = {"cpu": 64_000, "memory": 256 * 2**30, "pods": 110}
        if not dra:
            allocatable[EXTENDED] = devices
        engine.add_node(Node(f"node-{i:04d}", allocatable=allocatable))
    if dra:
        class_object = {
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        }
        engine.dra.put_class(parse_device_class(class_object))
        for i in range(nodes):
            engine.dra.put_slice(parse_resource_slice(slice_object(f"node-{i:04d}", devices)))
        for i in range(pods):
            engine.dra.put_claim(parse_resource_claim(claim_object(f"claim-{i:05d}")))
    for i in range(pods):
        engine.add_pod(claim_pod(i) if dra else extended_pod(i))
    settle_heap()  # as the live scheduler does once its informers have synced (both runs alike)
    placed = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    warm_start = cpu_start
    while (outcome := engine.schedule_one()) is not None:
        placed += outcome.node is not None
        if placed == WARMUP:
            warm_start = time.process_time()
    end = time.process_time()
    gc.unfreeze()
    gc.set_threshold(*DEFAULT_GC_THRESHOLDS)
    return Run(placed, time.perf_counter() - start, end - cpu_start, end - warm_start)


def selector_samples(count: int) -> list[float]:
    selector = compile_selector(SELECTOR)
    device = DeviceData(DRIVER, parse_resource_slice(slice_object("n", 1)).devices[0])
    assert selector.matches(device)
    samples = []
    for _ in range(count):
        start = time.perf_counter_ns()
        selector.matches(device)
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--evaluations", type=int, default=20000)
    args = parser.parse_args()
    with_claims, extended = [], []
    for _ in range(args.rounds):
        with_claims.append(run(args.nodes, args.devices, args.pods, dra=True))
        extended.append(run(args.nodes, args.devices, args.pods, dra=False))
    if any(r.placed != args.pods for r in with_claims + extended):
        raise SystemExit(f"dra_bench: not every pod was placed: {[r.placed for r in with_claims + extended]}")
    dra_cpu = statistics.median(r.cpu for r in with_claims)
    ext_cpu = statistics.median(r.cpu for r in extended)
    print(
        f"{args.nodes} nodes x {args.devices} devices, {args.pods} pods, in-process engine, "
        f"median of {args.rounds} A/B rounds"
    )
    report(
        "DRA pods/s (one claim each)", args.pods / statistics.median(r.elapsed for r in with_claims), "pods/s"
    )
    report(
        "extended-resource pods/s (same run)",
        args.pods / statistics.median(r.elapsed for r in extended),
        "pods/s",
    )
    report("DRA / extended resource, pods per CPU-second", ext_cpu / dra_cpu, "x", ">= 0.5")
    warm = statistics.median(r.warm_cpu for r in extended) / statistics.median(
        r.warm_cpu for r in with_claims
    )
    report(f"the same after the first {WARMUP} pods (CEL verdicts cached)", warm, "x")
    samples = selector_samples(args.evaluations)
    report("CEL selector on one device, p50", percentile(samples, 50), "us", "<= 20")
    report("CEL selector on one device, p99", percentile(samples, 99), "us")


if __name__ == "__main__":
    main()
