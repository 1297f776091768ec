"""CPU per new-pod syncPod: this tree against an older commit's worktree, alternated (needs root).

Usage: python benchmarks/sync_cpu_ab.py BASELINE_DIR [--rounds N]

The wall-clock p50 of agent_bench.py's syncPod follows the machine's load (a neighbour's disk traffic
stretches every fsync); the CPU the process spends in the syncs does much less. Each round runs, in a
fresh interpreter of each tree (baseline first), that tree's own `agent_bench.bench_sync_pod` with
NodeAgent.sync_pod wrapped to add up the process CPU time (time.process_time, every thread of the
process: a record committer's included) spent inside the calls, and prints the CPU per sync, the wall
p50 and the load average; then both medians and the ratio this / baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchstats import report

ROOT = Path(__file__).resolve().parents[1]

# Run inside the tree being measured (its benchmarks dir is the cwd and on sys.path).
PROBE = """
import json, os, shutil, sys, tempfile, time
sys.path.insert(0, os.getcwd())
import agent_bench
from agent.node import NodeAgent
spent = [0.0]
real = NodeAgent.sync_pod
def timed(self, *args, **kwargs):
    started = time.process_time()
    try:
        return real(self, *args, **kwargs)
    finally:
        spent[0] += time.process_time() - started
NodeAgent.sync_pod = timed
work = tempfile.mkdtemp()
try:
    out = agent_bench.bench_sync_pod(__import__("pathlib").Path(work))
finally:
    shutil.rmtree(work, ignore_errors=True)
samples = sorted(out[0] if isinstance(out, tuple) else out)
print(json.dumps({"cpu_ms": spent[0] / len(samples) * 1000, "p50_ms": samples[len(samples) // 2] * 1000}))
"""


def measure(tree: Path) -> tuple[float, float, float]:
    """(CPU ms per sync, wall p50 ms, 1-minute load average at the end) of one run in `tree`."""
    done = subprocess.run(
        [str(tree / ".venv" / "bin" / "python"), "-c", PROBE],
        cwd=tree / "benchmarks",
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"sync_cpu_ab: the run in {tree} failed:\n{done.stdout}{done.stderr}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return figures["cpu_ms"], figures["p50_ms"], os.getloadavg()[0]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    if os.geteuid() != 0:
        print("sync_cpu_ab needs root (real cgroups)", file=sys.stderr)
        return 1
    runs: dict[str, list[tuple[float, float, float]]] = {"baseline": [], "this tree": []}
    for round_ in range(options.rounds):
        for name, tree in (("baseline", options.baseline), ("this tree", ROOT)):
            cpu, p50, load = measure(tree)
            runs[name].append((cpu, p50, load))
            print(
                f"round {round_ + 1}: {name} CPU {cpu:.3f} ms, p50 {p50:.3f} ms (load {load:.1f})", flush=True
            )
    before = statistics.median(cpu for cpu, _, _ in runs["baseline"])
    after = statistics.median(cpu for cpu, _, _ in runs["this tree"])
    report(f"agent syncPod new pod CPU per sync [baseline {options.baseline.name}]", before, "ms")
    report("agent syncPod new pod CPU per sync [this tree]", after, "ms")
    report("agent syncPod new pod CPU per sync [ratio this / baseline]", after / before, "x", "<= 0.45 x")
    report("load average (1 min) at the end", os.getloadavg()[0], "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
