"""The cost of isolating a process pod's containers (issue 37), on this machine's real cgroup v1 (needs root).

Prints:
- syncPod p50/p99 for a new one-container pod that starts its process (`sleep infinity`): the pod cgroup,
  and, with issue 37, the container's own cgroup with its limits, its device cgroup rules and its own
  /dev in its mount namespace, then the fork and exec;
- 110 pods from cold to all processes running, and agent_bench.py's floor for it with the ratio: the pods'
  cgroups and records, and each container's cgroup with its limits and device rules and its process
  started in them (in a tree before that floor existed, the pod cgroups' floor).
It only uses what existed before issue 37, so `benchmarks/ab_baseline.py` can run it against the commit
before (copy it into the baseline worktree): the ratio new / baseline of the syncPod p50 is the cost.

    .venv/bin/python benchmarks/container_start_bench.py [--samples 60] [--sync-only]

`--sync-only` prints the syncPod figures alone (more A/B rounds in the same time).
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from agent_bench import bench_cold, bench_floor, config, pod_doc, sweep
from benchstats import percentile, report

from agent.cm.cgroups import make_pod_cgroups
from agent.composition import compose_node
from agent.podworkers.types import SyncContext, UpdateType
from kubenode.model import parse_pod

SAMPLES = 60


def bench_sync_new_running_pod(work: Path, samples_wanted: int = SAMPLES) -> list[float]:
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cgroups = make_pod_cgroups(root)
    agent = compose_node(config(root, work / "sync-run"), cgroups, [])
    cgroups.start(agent.allocatable())
    ctx = SyncContext(threading.Event(), lambda: 30)
    samples = []
    try:
        for i in range(samples_wanted):
            doc = pod_doc(i, run=True)
            pod = parse_pod({**doc, "metadata": {"name": f"r{i}", "uid": f"run-{i}"}})
            started = time.perf_counter()
            agent.syncer.sync_pod(UpdateType.CREATE, pod, ctx)
            samples.append(time.perf_counter() - started)
    finally:
        for i in range(samples_wanted):
            cgroups.destroy(f"run-{i}")
        agent.store.flush()
        cgroups.stop_and_remove_root()
        sweep(root)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=SAMPLES, help="new pods synced and timed")
    parser.add_argument("--sync-only", action="store_true", help="the syncPod figures alone")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("container_start_bench needs root (real cgroups)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="kn-container-bench-"))
    try:
        samples = bench_sync_new_running_pod(work, args.samples)
        report("syncPod new running pod p50", percentile(samples, 50) * 1000, "ms")
        report("syncPod new running pod p99", percentile(samples, 99) * 1000, "ms")
        if args.sync_only:
            return 0
        running = bench_cold(work, run=True)
        report("110 pods cold -> all processes running", running, "s")
        if "running" in inspect.signature(bench_floor).parameters:
            floor = bench_floor(work, running=True)
            report("raw floor for 110 running pods (pod, container cgroups, devices)", floor, "s")
        else:
            floor = bench_floor(work)
            report("raw mkdir/write floor for 110 pod cgroups", floor, "s")
        report("110 running pods / floor ratio", running / floor, "x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
