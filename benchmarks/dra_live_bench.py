"""DRA through a real `kubenode apiserver` and `kubenode scheduler run`: pods/s with one ResourceClaim each
against the same pods asking for an extended resource, in the same run, and the API server's CPU per claim
allocation.

Setup (not measured): 500 Nodes with allocatable `example.com/gpu: 8`, one node-local ResourceSlice of 8
devices per node, one DeviceClass selecting the driver by CEL, and 2,000 ResourceClaims (one device
each, with a CEL selector on the device's memory capacity) made beforehand, as kube's scheduler_perf
does for its DRA cases. Then, with the scheduler synced, two measured phases on the same cluster:
1. 2,000 pods asking for `example.com/gpu: 1` (the extended-resource peer);
2. 2,000 pods, each naming its own claim (`resourceClaimName`): the scheduler allocates a device,
   writes the claim's status (allocation and reservedFor) through `/status`, then binds.
A warm-up of 200 extended-resource pods comes first (not reported). There are 4,000 devices and 4,000
extended units, so neither phase runs out. For each phase: pods/s
from the first create to the last binding the watch saw, and the CPU seconds of the API server and the
scheduler in that window. The ratio DRA / extended is of pods/s and of pods per scheduler
CPU-second; the API server's CPU per claim allocation is its CPU per DRA pod less its CPU per
extended-resource pod (the claim status write and its watch events are the difference).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from benchstats import report
from dra_bench import DRIVER, EXTENDED, claim_object, slice_object
from scheduler_e2e_bench import BindWatch, free_port, profiled_scheduler, ready, wait_until

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.apiserver import ApiServerProcess  # noqa: E402
from kubenode.kubeclient import (  # noqa: E402
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
    load_kubeconfig,
)
from kubenode.kubeclient.client import Resource  # noqa: E402

CREATORS = 64


def node_object(i: int, devices: int) -> dict[str, Any]:
    name = f"node-{i:04d}"
    allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110", EXTENDED: str(devices)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }  # fmt: skip


def pod_object(name: str, claim: str = "") -> dict[str, Any]:
    requests = {"cpu": "100m"} if claim else {"cpu": "100m", EXTENDED: "1"}
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
    spec: dict[str, Any] = {
        "containers": [{**container, "resources": {"requests": requests, "limits": requests}}]
    }
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def create_all(client: KubeClient, resource: Resource, objects: list[dict[str, Any]]) -> float:
    namespace = "default" if resource.namespaced else None
    start = time.perf_counter()
    with ThreadPoolExecutor(CREATORS) as pool:
        for _ in pool.map(lambda obj: client.create(resource, obj, namespace, decode=False), objects):
            pass
    return time.perf_counter() - start


def measure(
    client: KubeClient, prefix: str, pods: list[dict[str, Any]], processes: dict[str, psutil.Process]
) -> tuple[float, dict[str, float]]:
    """Create the pods, wait for every binding; pods/s and each process's CPU seconds in the window."""
    watch = BindWatch(client, prefix, len(pods))
    before = {name: sum(p.cpu_times()[:2]) for name, p in processes.items()}
    start = time.time()
    create_all(client, PODS, pods)
    if not watch.done.wait(600):
        raise SystemExit(f"only {len(watch.bound)} of {len(pods)} {prefix} pods bound after 10 minutes")
    elapsed = max(watch.bound.values()) - start
    cpu = {name: sum(p.cpu_times()[:2]) - before[name] for name, p in processes.items()}
    watch.close()
    return len(pods) / elapsed, cpu


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--profiled-scheduler":
        raise SystemExit(profiled_scheduler(sys.argv[2], sys.argv[4:]))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--profile-scheduler", action="store_true", help="cProfile the scheduler process")
    args = parser.parse_args()
    prof = Path(tempfile.mkstemp(suffix=".prof")[1]) if args.profile_scheduler else None
    print(
        f"--- live DRA: {args.nodes} nodes x {args.devices} devices, {args.pods} pods per phase", flush=True
    )
    with ApiServerProcess() as api:
        client = KubeClient(load_kubeconfig(api.kubeconfig), pool_size=CREATORS + 8, timeout=120)
        create_all(client, NODES, [node_object(i, args.devices) for i in range(args.nodes)])
        device_class = {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        }  # fmt: skip
        client.create(DEVICE_CLASSES, device_class)
        slices = [slice_object(f"node-{i:04d}", args.devices) for i in range(args.nodes)]
        create_all(client, RESOURCE_SLICES, slices)
        claims = []
        for i in range(args.pods):
            claim = claim_object(f"claim-{i:05d}")
            del claim["metadata"]["uid"]
            claims.append(claim)
        create_all(client, RESOURCE_CLAIMS, claims)
        port = free_port()
        runner = [__file__, "--profiled-scheduler", str(prof), "--"] if prof else ["-m", "cli.main"]
        command = [sys.executable, *runner, "--log-level", "WARNING", "scheduler", "run"]
        command += ["--kubeconfig", str(api.kubeconfig), "--metrics-bind-address", f"127.0.0.1:{port}"]
        scheduler = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            wait_until(lambda: ready(port), 120, "the scheduler's informers to sync")
            processes = {
                "API server": psutil.Process(api.process.pid),  # type: ignore[union-attr]
                "scheduler": psutil.Process(scheduler.pid),
            }
            # Warm-up, not reported: the first pods after start pay for connections, caches and the heap.
            measure(client, "warm-", [pod_object(f"warm-{i:05d}") for i in range(args.pods // 10)], processes)
            extended = [pod_object(f"ext-{i:05d}") for i in range(args.pods)]
            ext_rate, ext_cpu = measure(client, "ext-", extended, processes)
            with_claims = [pod_object(f"dra-{i:05d}", f"claim-{i:05d}") for i in range(args.pods)]
            dra_rate, dra_cpu = measure(client, "dra-", with_claims, processes)
        finally:
            scheduler.terminate()
            scheduler.wait(60)
        allocated = sum(
            1
            for c in client.list_all(RESOURCE_CLAIMS, "default")[0]
            if (c.get("status") or {}).get("allocation")
        )
        client.close()
    if allocated != args.pods:
        raise SystemExit(f"dra_live_bench: {allocated} of {args.pods} claims allocated")
    report("live extended-resource pods/s", ext_rate, "pods/s")
    report("live DRA pods/s (one claim each)", dra_rate, "pods/s")
    report("live DRA / extended resource, pods/s", dra_rate / ext_rate, "x", ">= 0.5")
    report(
        "live DRA / extended resource, pods per scheduler CPU-second",
        ext_cpu["scheduler"] / dra_cpu["scheduler"],
        "x",
        ">= 0.5",
    )
    for name in ("API server", "scheduler"):
        report(f"CPU per extended-resource pod, {name}", ext_cpu[name] / args.pods * 1000, "ms/pod")
        report(f"CPU per DRA pod, {name}", dra_cpu[name] / args.pods * 1000, "ms/pod")
    per_claim = (dra_cpu["API server"] - ext_cpu["API server"]) / args.pods * 1000
    report("API server CPU per claim allocation (DRA pod less extended pod)", per_claim, "ms/claim")
    if prof is not None:
        import pstats

        print(f"--- scheduler profile ({prof}, both phases), top 25 by cumulative time")
        pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
