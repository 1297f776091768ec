"""One benchmark script, this tree against an older commit's worktree, alternated in one session.

Usage: python benchmarks/ab_baseline.py BASELINE_DIR SCRIPT "LABEL" [--rounds N] [-- ARGS...]

BASELINE_DIR is a `git worktree` of the commit to compare with, with its own venv
(`git worktree add ../b596920 b596920 && make -C ../b596920 .venv/.installed-stamp`).
Each round runs the baseline's copy of SCRIPT with its interpreter, then this tree's with
this one (A/B/A/B), so the machine's neighbours weigh on both alike; it reads the figure
printed under LABEL (a label the benchmarks print today) and prints both medians, the
ratio new / baseline and the load average at each run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
from pathlib import Path

from benchstats import report

ROOT = Path(__file__).resolve().parents[1]


def figure(tree: Path, script: str, label: str, args: list[str]) -> tuple[float, float]:
    """(the figure under label, the 1-minute load average when the run ended)."""
    python = tree / ".venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), str(tree / "benchmarks" / script), *args],
        cwd=tree / "benchmarks",
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"ab_baseline: {tree}/benchmarks/{script} failed:\n{done.stdout}{done.stderr}")
    for line in done.stdout.splitlines():
        if line.startswith(label) and line[len(label) :][:1] == " ":
            return float(line[len(label) :].split()[0]), os.getloadavg()[0]
    raise SystemExit(f"ab_baseline: {tree}/benchmarks/{script} printed no {label!r}:\n{done.stdout}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("baseline", type=Path)
    parser.add_argument("script")
    parser.add_argument("label")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("args", nargs="*", help="arguments for both runs (after --)")
    options = parser.parse_args()
    if not (options.baseline / "benchmarks" / options.script).is_file():
        raise SystemExit(f"ab_baseline: {options.baseline}/benchmarks/{options.script}: no such benchmark")
    old: list[float] = []
    new: list[float] = []
    for round_ in range(options.rounds):
        value, load = figure(options.baseline, options.script, options.label, options.args)
        old.append(value)
        print(f"round {round_ + 1}: baseline {value:.3f} (load {load:.1f})", flush=True)
        value, load = figure(ROOT, options.script, options.label, options.args)
        new.append(value)
        print(f"round {round_ + 1}: this tree {value:.3f} (load {load:.1f})", flush=True)
    name = options.label
    report(f"{name} [baseline {options.baseline.name}]", statistics.median(old), "")
    report(f"{name} [this tree]", statistics.median(new), "")
    report(f"{name} [ratio this / baseline]", statistics.median(new) / statistics.median(old), "x")
    report("load average (1 min) at the end", os.getloadavg()[0], "")


if __name__ == "__main__":
    main()
