"""The node guarding itself, measured on this machine's real cgroups, v1 or v2 (needs root).

Prints:
- the CPU of a real `kubenode agent` process while 10 pods write to their logs as fast as they can (the log
  manager checking every second, rotating past 4Mi, 5 files each), as a share of one core;
- what those writers' throughput loses: the same pods (same cgroups, same QoS) write the same bytes to their
  logs (rotated by the agent) and, in the same run, to plain files of their own; the ratio of the two
  throughputs, and the agent's CPU in both cases;
- the largest pod log directory seen while they write, against the bound (max size x max files plus one
  check interval of writing at the measured rate);
- the eviction manager's synchronize() with 110 running pods and a threshold always met (observe the signals,
  every pod's usage, reclaim, observe again, rank; no pod is evicted: manifest pods are critical), p50 and
  p99, against the floor of the raw reads it needs (the pods' memory and pid files in the host's cgroup
  version, benchmarks/cgroupfloor.py; their log directories, one statvfs and one /proc listing), and as a
  share of one core at the kubelet's 10 s period.
Every cgroup, process and file it makes is removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import yaml
from agent_bench import PODS, config, sweep, write_manifests
from benchstats import percentile, report
from cgroupfloor import RawCgroups

from agent.cm.cgroups import make_pod_cgroups
from agent.composition import compose_node
from agent.config.sources import ManifestSource
from agent.container.podview import PodView
from agent.eviction.podusage import disk_usage
from agent.node import NodeAgent

REPO = Path(__file__).resolve().parents[1]
WRITERS = 10
BYTES_PER_WRITER = 48 * 2**20
LOG_MAX_SIZE = 4 * 2**20
LOG_MAX_FILES = 5
LOG_INTERVAL_S = 1.0
SYNC_SAMPLES = 30
DEADLINE_S = 300.0
# The writer: marks its start, writes its bytes as 65-byte lines to stdout (its log; with "plain", a plain
# file of its own instead), then records how long that took in nanoseconds (a script file, so that kube's
# $(VAR) expansion of a pod's command does not touch it).
WRITER = """#!/bin/sh
if [ "$2" = plain ]; then exec > "$1.out"; fi
touch "$1.start"
s=`date +%s%N`
yes 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef | head -c {size}
e=`date +%s%N`
echo `expr $e - $s` > "$1.tmp" && mv "$1.tmp" "$1.ns"
"""


def _wait_for(paths: list[Path], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {DEADLINE_S:.0f} s")
        time.sleep(0.01)


def _throughput(results: list[Path]) -> float:
    """Mean MB/s of the writers, from the nanoseconds each recorded."""
    return sum(BYTES_PER_WRITER / (int(p.read_text()) / 1e9) / 1e6 for p in results) / len(results)


def bench_chatty(work: Path, script: Path, *, plain: bool) -> tuple[float, float, int]:
    """(agent CPU in cores, the writers' MB/s, the largest pod log directory in bytes) under a real agent;
    with `plain` the same pods write to plain files of their own instead of their logs."""
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    manifests, state, marks = work / "manifests", work / "state", work / "marks"
    for directory in (manifests, marks):
        directory.mkdir()
    for i in range(WRITERS):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"chatty{i}"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "command": ["sh", str(script), str(marks / f"w{i}"), "plain" if plain else "log"],
                        # Burstable, the 10 together asking for 2 cores (this machine's): BestEffort's tier
                        # has cpu.shares 2 and would measure the QoS tier against the machine's other load,
                        # not the logging.
                        "resources": {"requests": {"cpu": "200m"}},
                    }
                ],
            },
        }
        (manifests / f"chatty{i}.yaml").write_text(yaml.safe_dump(pod))
    settings = {
        "nodeName": "bench",
        "manifests": str(manifests),
        "stateDir": str(state),
        "cgroupRoot": root,
        "devicePluginDir": None,
        "listen": "",
        "containerLogMaxSize": f"{LOG_MAX_SIZE // 2**20}Mi",
        "containerLogMaxFiles": LOG_MAX_FILES,
        "containerLogMonitorInterval": LOG_INTERVAL_S,
    }
    (work / "agent.yaml").write_text(yaml.safe_dump(settings))
    argv = [sys.executable, "-m", "cli.main", "--log-level", "WARNING", "agent"]
    argv += ["--config", str(work / "agent.yaml")]
    proc = subprocess.Popen(argv, cwd=REPO)
    try:
        agent = psutil.Process(proc.pid)
        _wait_for([marks / f"w{i}.start" for i in range(WRITERS)], "the writers to start")
        cpu_before, began = sum(agent.cpu_times()[:2]), time.monotonic()
        results = [marks / f"w{i}.ns" for i in range(WRITERS)]
        largest = 0  # the largest pod log directory seen while they write
        deadline = time.monotonic() + DEADLINE_S
        while not all(p.exists() for p in results):
            if time.monotonic() > deadline:
                raise SystemExit(f"the writers did not finish within {DEADLINE_S:.0f} s")
            largest = max([largest, *(disk_usage(d) for d in (state / "logs").iterdir())])
            time.sleep(0.05)
        cores = (sum(agent.cpu_times()[:2]) - cpu_before) / (time.monotonic() - began)
        return cores, _throughput(results), largest
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        proc.kill()
        proc.wait()
        sweep(root)


def bench_eviction_sync(work: Path) -> tuple[list[float], list[float]]:
    """(synchronize() seconds, floor seconds) with 110 running pods and nodefs.available<99% met."""
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cfg = config(root, work)
    cfg.eviction_hard = "nodefs.available<99%"
    cfg.eviction_monitoring_period = 0  # not in the background: each round below is timed on its own
    write_manifests(cfg.manifests, run=True)
    cgroups = make_pod_cgroups(root)
    agent = compose_node(cfg, cgroups, [ManifestSource(cfg.manifests, cfg.node_name)])
    agent.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not (
            len(views := agent.views.pods()) == PODS and all(v.record.phase == "Running" for v in views)
        ):
            if time.monotonic() > deadline:
                raise SystemExit(f"110 pods did not run within {DEADLINE_S:.0f} s")
            time.sleep(0.05)
        syncs, floors = [], []
        raw = RawCgroups()
        for _ in range(SYNC_SAMPLES):
            started = time.perf_counter()
            evicted = agent.evictions.synchronize()
            syncs.append(time.perf_counter() - started)
            assert evicted is None, "a critical pod was evicted"
            started = time.perf_counter()
            _raw_reads(agent, views, raw)
            floors.append(time.perf_counter() - started)
        return syncs, floors
    finally:
        agent.stop(terminate_pods=True)
        cgroups.stop_and_remove_root()
        sweep(root)


def _raw_reads(agent: NodeAgent, views: list[PodView], raw: RawCgroups) -> None:
    """What one round with nodefs.available met must read at least: the node's signals (the filesystem,
    the process count, the kubepods cgroup's memory) and, to rank the pods by their storage, each pod's
    log directory. (Memory and pid files are read per pod only when a memory or pid threshold is met.)"""
    os.statvfs(agent.config.state_dir)
    sum(1 for name in os.listdir("/proc") if name.isdigit())
    kubepods = f"{str(agent.config.cgroup_root).rstrip('/')}/kubepods"
    for file in raw.usage_files(kubepods)[:2]:  # its memory usage and memory.stat
        file.read_bytes()
    for view in views:
        pod = view.pod
        if pod is not None:
            disk_usage(agent.runtime.pod_logs_dir(pod.namespace, pod.name, pod.uid))


def main() -> int:
    if os.geteuid() != 0:
        print("node_pressure_bench needs root (real cgroups)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="kn-pressure-bench-"))
    try:
        script = work / "writer.sh"
        script.write_text(WRITER.format(size=BYTES_PER_WRITER))
        runs = {}
        # Plain, logged, plain again (averaged): the machine's other load drifts during a run.
        for name, plain in (("plain1", True), ("log", False), ("plain2", True)):
            (work / name).mkdir()
            runs[name] = bench_chatty(work / name, script, plain=plain)
        cores, agent_mbs, largest = runs["log"]
        plain_cores = (runs["plain1"][0] + runs["plain2"][0]) / 2
        plain_mbs = (runs["plain1"][1] + runs["plain2"][1]) / 2
        report("agent CPU while 10 pods write flat out to logs", cores * 100, "% of a core")
        report("agent CPU while they write to plain files", plain_cores * 100, "% of a core")
        report("writers' throughput to their logs (mean)", agent_mbs, "MB/s")
        report("writers' throughput to plain files (mean)", plain_mbs, "MB/s")
        report("writers' throughput: logs / plain files", agent_mbs / plain_mbs, "x")
        # The bound: max size x max files, plus one check interval of writing at the measured rate.
        bound = LOG_MAX_SIZE * LOG_MAX_FILES + agent_mbs * 1e6 * LOG_INTERVAL_S
        report("largest pod log dir while writing / bound", largest / bound, "x", "<= 1")
        syncs, floors = bench_eviction_sync(work / "evict")
        p50 = percentile(syncs, 50)
        report("eviction synchronize() 110 pods p50", p50 * 1000, "ms")
        report("eviction synchronize() 110 pods p99", percentile(syncs, 99) * 1000, "ms")
        report("raw reads floor for one round p50", percentile(floors, 50) * 1000, "ms")
        report("eviction synchronize() / floor", p50 / percentile(floors, 50), "x")
        report("eviction CPU share at the 10 s period", p50 / 10.0 * 100, "% of a core")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
