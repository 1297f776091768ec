"""Run one benchmark script for `make bench`: its figures recorded, its run time printed, its failure loud.

Usage: python tools/benchrun.py FIGURES.jsonl benchmarks/SCRIPT.py [ARGS...]

Flow: run the script with this interpreter and $KUBENODE_BENCH_FIGURES naming FIGURES.jsonl (each
`report()` appends a figure there), its output straight to the terminal; then print how long it took
(wall, and the CPU of the script and of every child it waited for) and the load average before and
after, and append that as one `run` line to the same file, which tools/figures.py renders as the
run-time table under the figures. A script that exits non-zero, or exits 0 having recorded no figure,
makes this exit non-zero with one line saying so: `make bench` stops there and docs/figures.md is
not written, so a table is never short of a script's rows without anyone noticing.
"""

from __future__ import annotations

import datetime
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

FIGURES_ENV = "KUBENODE_BENCH_FIGURES"  # the name benchmarks/benchstats.py reads


def recorded_figures(path: Path, bench: str) -> int:
    """How many figures of `bench` the file holds (0 when it does not exist yet)."""
    if not path.exists():
        return 0
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return sum(1 for row in rows if row.get("bench") == bench and "run" not in row)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    figures, script, args = Path(argv[1]), Path(argv[2]), argv[3:]
    if not script.is_file():
        print(f"benchrun: {script}: no such benchmark script", file=sys.stderr)
        return 2
    bench = script.stem
    before = recorded_figures(figures, bench)
    load_start = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.UTC)
    print(f"=== {bench} {' '.join(args)} (load average {load_start:.1f})", flush=True)
    cpu_start, wall_start = children_cpu_s(), time.perf_counter()
    env = dict(os.environ, **{FIGURES_ENV: str(figures)})
    returncode = subprocess.run([sys.executable, str(script), *args], env=env, check=False).returncode
    wall, cpu = time.perf_counter() - wall_start, children_cpu_s() - cpu_start
    load_end = os.getloadavg()[0]
    count = recorded_figures(figures, bench) - before
    print(
        f"=== {bench}: {wall:.1f} s wall, {cpu:.1f} s CPU, {count} figures, "
        f"load average {load_start:.1f} -> {load_end:.1f}",
        flush=True,
    )
    if returncode != 0:
        print(
            f"benchrun: {bench} failed (exit status {returncode}): its figures are incomplete",
            file=sys.stderr,
        )
        return 1
    if count == 0:
        print(f"benchrun: {bench} exited 0 but recorded no figure in {figures}", file=sys.stderr)
        return 1
    run = {
        "args": args,
        "started": started.isoformat(timespec="seconds"),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "load": [round(load_start, 2), round(load_end, 2)],
        "figures": count,
    }
    with figures.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"bench": bench, "run": run}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
