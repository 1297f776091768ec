"""Render docs/figures.md, the one table of measured figures, from what `make bench` recorded.

Each benchmark's `report()` appends a JSON line (bench, name, value, unit, goal) to the file named by
$KUBENODE_BENCH_FIGURES, and tools/benchrun.py appends one `run` line per script (its arguments, wall
and CPU seconds, load average). This turns them into a Markdown table of figures headed by the machine
and the time they were measured on (date, CPUs, kernel, cgroup version, load average at the start and
the end of the run), followed by how long each script took. The figure names (labels) that the old file
had and this run did not produce are listed on stderr: a renamed label or a script that stopped
reporting one, either of which breaks the comparison of old and new runs.
Usage: python tools/figures.py FIGURES.jsonl docs/figures.md
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.cm.cgroups.detect import CGROUP_MOUNT, detect_version

SCRIPTS = {
    "deviceplugin_bench": "device plugin",
    "agent_bench": "node agent",
    "dra_node_bench": "node agent, DRA claims (kubenode dra-driver)",
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
    "prober_bench": "node agent, probes",
    "top_bench": "node agent, kubectl top",
    "exec_bench": "node agent, kubectl exec",
    "node_pressure_bench": "node agent, node pressure",
    "extender_bench": "scheduler extender",
    "dra_bench": "scheduler, Dynamic Resource Allocation (in-process)",
    "dra_live_bench": "scheduler and API server, Dynamic Resource Allocation (issue 39)",
    "cri_bench": "node agent, CRI runtime (containerd)",
    "cri_stats_bench": "node agent, CRI stats",
    "cri_exec_bench": "node agent, kubectl exec into CRI pods",
    "cri_bare_bench": "node agent, CRI pods against a bare CRI client",
}


def _cgroup_version() -> str:
    """As the agent decides it (statfs of the mount; a hybrid host is v1)."""
    return f"v{detect_version(CGROUP_MOUNT)}"


def _value(figure: dict[str, Any]) -> str:
    value = float(figure["value"])
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2 if abs(value) >= 1 else 3
    return f"{value:,.{digits}f} {figure['unit']}"


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def machine() -> str:
    """The machine the figures were measured on: CPUs, their model, kernel and cgroup version."""
    cpus = f"{os.cpu_count()} CPUs ({_cpu_model()})"
    return f"{cpus}, {platform.system()} {platform.release()}, cgroup {_cgroup_version()}"


def _script_minutes(runs: Sequence[dict[str, Any]]) -> float:
    return sum(float(r["run"]["wall_s"]) for r in runs) / 60


def when(runs: list[dict[str, Any]], now: datetime.datetime) -> str:
    """The date and span of the run, and how busy the machine was at its start and its end: a shared
    machine's other work shows in every figure."""
    load_end = f"{os.getloadavg()[0]:.1f} at the end of the run"
    if not runs:
        return f"{now:%Y-%m-%d}, load average {load_end}"
    first = datetime.datetime.fromisoformat(runs[0]["run"]["started"])
    minutes = _script_minutes(runs)
    span = f"{first:%Y-%m-%d} from {first:%H:%M} to {now:%H:%M} UTC ({minutes:.0f} min of scripts)"
    return f"{span}, load average {float(runs[0]['run']['load'][0]):.1f} at the start and {load_end}"


def _run_table(runs: list[dict[str, Any]]) -> list[str]:
    if not runs:
        return []
    lines = [
        "",
        "## How long each script took",
        "",
        "Wall and CPU seconds (the script's and those of the children it waited for), as tools/benchrun.py",
        "measured them in this run, with the load average when the script started.",
        "",
        "| script | arguments | wall | CPU | load at start |",
        "|---|---|---|---|---|",
    ]
    for row in runs:
        run = row["run"]
        times = f"{run['wall_s']:.0f} s | {run['cpu_s']:.0f} s | {run['load'][0]:.1f}"
        lines.append(f"| {row['bench']} | {' '.join(run['args'])} | {times} |")
    total = sum(float(r["run"]["wall_s"]) for r in runs)
    cpu = sum(float(r["run"]["cpu_s"]) for r in runs)
    lines.append(f"| all {len(runs)} scripts |  | {total:.0f} s | {cpu:.0f} s |  |")
    return lines


def render(
    figures: list[dict[str, Any]], machine: str, when: str, runs: Sequence[dict[str, Any]] = ()
) -> str:
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
        lines.append(f"| {_part(figure)} | {figure['name']} | {_value(figure)} | {figure['goal'] or ''} |")
    return "\n".join(lines + _run_table(list(runs))) + "\n"


def _part(figure: dict[str, Any]) -> str:
    return str(SCRIPTS.get(figure["bench"], figure["bench"]))


def _names(markdown: str) -> set[str]:
    """The figure names (labels) of a figures table: what must stay the same for runs to compare."""
    names = set()
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] not in ("part", "---"):
            names.add(cells[1])
    return names


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    recorded = Path(argv[1])
    if not recorded.exists():
        print(f"figures.py: {recorded}: no figures recorded (run `make bench`)", file=sys.stderr)
        return 1
    lines = [json.loads(line) for line in recorded.read_text().splitlines() if line.strip()]
    runs = [line for line in lines if "run" in line]
    figures = [line for line in lines if "run" not in line]
    if not figures:
        print(f"figures.py: {recorded} holds no figure", file=sys.stderr)
        return 1
    target = Path(argv[2])
    previous = _names(target.read_text()) if target.exists() else set()
    now = datetime.datetime.now(datetime.UTC)
    target.write_text(render(figures, machine(), when(runs, now), runs))
    scripts = len({f["bench"] for f in figures})
    minutes = _script_minutes(runs)
    print(f"wrote {target} ({len(figures)} figures from {scripts} scripts, {minutes:.1f} min of scripts)")
    gone = sorted(previous - {str(f["name"]).strip() for f in figures})
    if gone:
        print(f"figures.py: {len(gone)} figures of the old {target} are not in this run:", file=sys.stderr)
        for name in gone:
            print(f"  {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
