"""Render docs/figures.md, the one table of measured figures, from what `make bench` recorded.

Each benchmark's `report()` appends a JSON line (bench, name, value, unit, goal) to the file named by
$KUBENODE_BENCH_FIGURES; this turns them into a Markdown table with the machine they were measured on.
Usage: python tools/figures.py FIGURES.jsonl docs/figures.md
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

SCRIPTS = {
    "deviceplugin_bench": "device plugin",
    "agent_bench": "node agent",
    "volume_bench": "node agent, volumes",
    "agent_cluster_bench": "node agent, joined to a cluster",
    "scheduler_bench": "scheduler",
    "scheduler_e2e_bench": "scheduler against the API server",
    "apiserver_bench": "API server",
    "watch_index_bench": "API server, pod watchers indexed by node",
    "cluster_scale_bench": "density test on hollow nodes",
    "cdihook_bench": "CDI cpuset hook",
    "hostile_bench": "under hostile input (issue 14)",
    "topology_bench": "Topology Manager admission (issue 28)",
    "cgroup2_guest_bench": "node agent, cgroup v2 guest (qemu TCG emulation)",
}


def _cgroup_version() -> str:
    return "v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists() else "v1"


def _value(figure: dict[str, Any]) -> str:
    value = float(figure["value"])
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2 if abs(value) >= 1 else 3
    return f"{value:,.{digits}f} {figure['unit']}"


def render(figures: list[dict[str, Any]], machine: str, when: str) -> str:
    lines = [
        "# Measured figures",
        "",
        "Made by `make bench` (tools/figures.py, from the scripts in `benchmarks/`); do not edit by hand.",
        "The README and the docs link here instead of keeping copies. Speed goals live in these",
        "scripts, not in the tests.",
        "",
        f"Measured on {machine}, {when}.",
        "",
        "| part | figure | measured | goal |",
        "|---|---|---|---|",
    ]
    for figure in figures:
        part = SCRIPTS.get(figure["bench"], figure["bench"])
        lines.append(f"| {part} | {figure['name']} | {_value(figure)} | {figure['goal'] or ''} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    figures = [json.loads(line) for line in Path(argv[1]).read_text().splitlines() if line.strip()]
    machine = f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, cgroup {_cgroup_version()}"
    # A shared machine's other work shows in every figure; say how busy it was when the run ended.
    machine += f", load average {os.getloadavg()[0]:.1f} at the end of the run"
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    Path(argv[2]).write_text(render(figures, machine, when))
    print(f"wrote {argv[2]} ({len(figures)} figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
