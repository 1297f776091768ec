"""Shared helpers for the benchmark scripts: percentiles, memory and a figure printer."""

from __future__ import annotations

import json
import os
import resource
import sys
from collections.abc import Sequence
from pathlib import Path

import psutil


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of samples (pct in 0..100)."""
    if not samples:
        raise ValueError("percentile of no samples")
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def rss_mib(pid: int | None = None) -> float:
    """Resident set size of a process (default: this one) in MiB."""
    return float(psutil.Process(pid).memory_info().rss) / (1024 * 1024)


def peak_rss_mib() -> float:
    """Peak resident set size of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# `make bench` names a file here; every figure is also appended to it, one JSON object a line, and
# tools/figures.py turns the lot into docs/figures.md, the one table of figures the docs link to.
FIGURES_ENV = "KUBENODE_BENCH_FIGURES"


def report(name: str, value: float, unit: str, goal: str = "") -> None:
    """Print one figure as an aligned line; the goal, where there is one, follows in brackets."""
    suffix = f"   [goal {goal}]" if goal else ""
    print(f"{name:<48} {value:>12.3f} {unit}{suffix}", flush=True)
    if path := os.environ.get(FIGURES_ENV):
        figure = {"bench": Path(sys.argv[0]).stem, "name": name, "value": value, "unit": unit, "goal": goal}
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(figure) + "\n")
