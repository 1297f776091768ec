"""One benchmark script, this tree against an older commit's worktree, alternated in one session.

Usage: python benchmarks/ab_baseline.py BASELINE_DIR SCRIPT --label LABEL [--label ...] [--rounds N] [-- ARGS]

BASELINE_DIR is a `git worktree` of the commit to compare with, with its own venv
(`git worktree add ../b596920 b596920 && make -C ../b596920 .venv/.installed-stamp`).
Each round runs the baseline's copy of SCRIPT with its interpreter, then this tree's with
this one (A/B/A/B), so the machine's neighbours weigh on both alike; it reads the figures
printed under each LABEL (labels the benchmarks print today) and prints both medians, the
ratio new / baseline and the load average at each run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchstats import FIGURES_ENV, report

ROOT = Path(__file__).resolve().parents[1]


def figures(tree: Path, script: str, labels: list[str], args: list[str]) -> tuple[list[float], float]:
    """(the figure under each label, the 1-minute load average when the run ended)."""
    python = tree / ".venv" / "bin" / "python"
    # Each run's own figures are this script's input, not figures of the run (benchstats.py's file).
    env = {name: value for name, value in os.environ.items() if name != FIGURES_ENV}
    done = subprocess.run(
        [str(python), str(tree / "benchmarks" / script), *args],
        cwd=tree / "benchmarks",
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"ab_baseline: {tree}/benchmarks/{script} failed:\n{done.stdout}{done.stderr}")
    found: dict[str, float] = {}
    for line in done.stdout.splitlines():
        for label in labels:
            if line.startswith(label) and line[len(label) :][:1] == " ":
                found[label] = float(line[len(label) :].split()[0])
    missing = [label for label in labels if label not in found]
    if missing:
        raise SystemExit(f"ab_baseline: {tree}/benchmarks/{script} printed no {missing[0]!r}:\n{done.stdout}")
    return [found[label] for label in labels], os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("baseline", type=Path)
    parser.add_argument("script")
    parser.add_argument("--label", action="append", required=True, help="a figure to compare (repeat)")
    parser.add_argument("--rounds", type=int, default=3)
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    options = parser.parse_args(argv[:split])
    options.args = argv[split + 1 :]  # for both runs
    if not (options.baseline / "benchmarks" / options.script).is_file():
        raise SystemExit(f"ab_baseline: {options.baseline}/benchmarks/{options.script}: no such benchmark")
    old: list[list[float]] = []
    new: list[list[float]] = []
    for round_ in range(options.rounds):
        for tree, runs, name in ((options.baseline, old, "baseline"), (ROOT, new, "this tree")):
            values, load = figures(tree, options.script, options.label, options.args)
            runs.append(values)
            shown = ", ".join(f"{value:.3f}" for value in values)
            print(f"round {round_ + 1}: {name} {shown} (load {load:.1f})", flush=True)
    for i, label in enumerate(options.label):
        before = statistics.median(run[i] for run in old)
        after = statistics.median(run[i] for run in new)
        report(f"{label} [baseline {options.baseline.name}]", before, "")
        report(f"{label} [this tree]", after, "")
        report(f"{label} [ratio this / baseline]", after / before if before else float("nan"), "x")
    report("load average (1 min) at the end", os.getloadavg()[0], "")


if __name__ == "__main__":
    main()
