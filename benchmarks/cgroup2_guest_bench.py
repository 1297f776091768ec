"""The node agent's benchmarks on a real cgroup v2 kernel, in the virtme-ng guest UNDER QEMU TCG EMULATION.

This host is a cgroup v1 hybrid, so `tools/cgroup2_guest.py --bench ...` boots Debian's kernel under qemu
without KVM and runs the agent's own benchmark scripts there, whole, on the v2 backend:
benchmarks/agent_bench.py (syncPod for a new pod, pods from cold to all pod cgroups and its raw v2
mkdir/write floor, pods from cold to all processes running, the agent's RSS) and benchmarks/cgroups_bench.py
(the cgroup layer's ensure/destroy against its v2 floor). Their figures come back through the guest's
figures.jsonl and are printed here with a label saying where they were measured.
Emulation makes everything tens to hundreds of times slower than a real v2 node, so the sizes are small
(GUEST_PODS pods, GUEST_SYNC_SAMPLES syncs instead of 110 and 200) and no goal is attached; read the
ratios, not the times. `make bench` and `make bench-cgroup2` run it. Needs root (the guest boots as the
same user and makes cgroups).

Emulation does not slow everything alike: the agent's Python runs ~15x slower there than here, a floor's
bare system calls ~3-4x, so an agent / floor ratio in the guest is no reading of a v2 host's. The same
scripts therefore run in a second boot of the same guest with its cgroups remounted as this host's v1
hybrid layout (`tools/cgroup2_guest.py --v1-hybrid`), and for each ratio the script prints v2 / v1: what
the v2 path costs beyond the v1 path under the same emulation. (A v2 host's ratio can then be estimated as
this host's v1 ratio times that; only a real v2 host measures it.)

`--ab BASELINE_DIR` runs, instead, issue 42's cgroup v2 syncPod goal in one boot: benchmarks/ab_baseline.py
alternates benchmarks/sync_new_pod_bench.py (syncPod for a new pod, agent_bench.py's first figure) in this
tree and in BASELINE_DIR (a worktree of b596920 with its own venv, shared into the guest read-only; the
script is copied there first) for `--rounds` rounds and prints both medians and the ratio.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchstats import report

REPO = Path(__file__).resolve().parents[1]
GUEST_PODS = 30
GUEST_SYNC_SAMPLES = 40
GUEST_DEADLINE_S = 600  # a cold start of GUEST_PODS under emulation; the host's bench allows 60 s
LABEL = "(cgroup v2, under qemu TCG emulation)"
V1_LABEL = "(cgroup v1 hybrid, same guest)"
# Figures whose v2 / v1 quotient is printed: the ratios to a floor, and syncPod's own time.
COMPARED = (
    "agent syncPod new pod p50 (no process start)",
    "agent / floor ratio",
    "agent running / floor ratio",
    "ensure() total / raw floor",
)
AB_SCRIPT = "sync_new_pod_bench.py"
AB_LABEL = "agent syncPod new pod p50 (no process start)"


def guest_benches(pods: int, samples: int) -> list[str]:
    agent = f"benchmarks/agent_bench.py --pods {pods} --samples {samples} --deadline {GUEST_DEADLINE_S}"
    return [agent, f"benchmarks/cgroups_bench.py --pods {pods}"]


def ab_benches(baseline: Path, rounds: int, samples: int) -> list[str]:
    """The A/B of syncPod for a new pod against `baseline` (the script copied there: it runs its own copy)."""
    shutil.copy(REPO / "benchmarks" / AB_SCRIPT, baseline / "benchmarks" / AB_SCRIPT)
    label = shlex.quote(AB_LABEL)
    return [f"benchmarks/ab_baseline.py {baseline} {AB_SCRIPT} --label {label} --rounds {rounds} -- "
            f"--samples {samples}"]  # fmt: skip


def run_boot(
    benches: list[str], share: list[Path], *, v1_hybrid: bool = False
) -> list[dict[str, object]] | None:
    """One guest boot running `benches`; the figures it recorded, or None (the reason printed)."""
    out = Path(tempfile.mkdtemp(prefix="kn-cg2-bench-"))
    runner = [sys.executable, str(REPO / "tools/cgroup2_guest.py"), "--deadline", "1800", "--out", str(out)]
    for directory in share:
        runner += ["--share", str(directory)]  # the guest's /tmp and /var/tmp are its own
    if v1_hybrid:
        runner.append("--v1-hybrid")
    for bench in benches:
        runner += ["--bench", bench]
    cgroups = "cgroup v1 hybrid" if v1_hybrid else "cgroup v2"
    print(
        f"cgroup2_guest_bench: booting the guest ({cgroups}); its console goes to {out}/runner.log",
        flush=True,
    )
    with (out / "runner.log").open("w") as log:
        done = subprocess.run(runner, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    figures = out / "figures.jsonl"
    if done.returncode != 0 or not figures.exists():
        print(f"cgroup2_guest_bench: the guest run ({cgroups}) failed; see {out}/runner.log", file=sys.stderr)
        return None
    rows = [json.loads(line) for line in figures.read_text().splitlines() if line.strip()]
    shutil.rmtree(out, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=GUEST_PODS)
    parser.add_argument("--samples", type=int, default=GUEST_SYNC_SAMPLES)
    parser.add_argument("--ab", type=Path, help="a baseline worktree: the syncPod A/B instead (see above)")
    parser.add_argument("--rounds", type=int, default=3, help="A/B rounds (with --ab)")
    parser.add_argument("--no-v1", action="store_true", help="skip the v1 hybrid boot (v2 figures only)")
    args = parser.parse_args()
    if args.ab is not None and not (args.ab / ".venv").is_dir():
        print(f"cgroup2_guest_bench: {args.ab}: not a worktree with its own .venv", file=sys.stderr)
        return 2
    if args.ab is not None:
        baseline = args.ab.resolve()
        ab = run_boot(ab_benches(baseline, args.rounds, args.samples), [baseline])
        if ab is None:
            return 1
        for figure in ab:
            report(f"{figure['name']} {LABEL}", float(str(figure["value"])), str(figure["unit"]))
        return 0
    benches = guest_benches(args.pods, args.samples)
    v2 = run_boot(benches, [])
    if v2 is None:
        return 1
    for figure in v2:
        report(f"{figure['name']} {LABEL}", float(str(figure["value"])), str(figure["unit"]))
    if args.no_v1:
        return 0
    v1 = run_boot(benches, [], v1_hybrid=True)
    if v1 is None:
        return 1
    for figure in v1:
        report(f"{figure['name']} {V1_LABEL}", float(str(figure["value"])), str(figure["unit"]))
    v1_values = {str(figure["name"]): float(str(figure["value"])) for figure in v1}
    for figure in v2:
        name = str(figure["name"])
        if name in COMPARED and v1_values.get(name):
            report(f"{name}: v2 / v1 in the same guest", float(str(figure["value"])) / v1_values[name], "x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
