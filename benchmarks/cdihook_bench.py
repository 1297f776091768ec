"""Latency of the CDI createRuntime hook, as a runtime sees it: spawn to exit, against interpreter start.

The hook runs on every start of a pinned container. Each run pins a real `sleep` process in a real cgroup
cpuset, v1 or v2 (a cgroup of our own, removed at the end), with the command the CDI spec names:
- `cdi-hook`: the plugin's default without a bundle (deviceplugin.hookcommand), this interpreter with
  `-I -S` on the hook's bytecode, as a wheel install or `make install` runs it;
- `cdi-hook (DaemonSet bundle)`: what `kubenode cdi-hook install` copies to a host (its own loader, libc,
  interpreter and hook), installed into a temporary directory.
The floor, measured in the same run: the real interpreter (sys.executable resolved, not a version-manager
shim) running `-I -S -c pass`; the goal is a p95 within 1.5x of it. `python -c pass` (with site) as before.
Needs root and a cpuset controller: the cgroup v1 hierarchy (as on the project's machines) or cgroup v2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchstats import percentile, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # harness/ lives at the repository root

from deviceplugin.hookbundle import install
from deviceplugin.hookcommand import HookCommand, this_interpreter
from harness.cgroupfs import cgroup_version

RUNS = 60
CGROUP_ROOT = Path("/sys/fs/cgroup")
INTERPRETER = os.path.realpath(sys.executable)
RATIO_GOAL = 1.5


def timed(command: list[str], stdin: str = "") -> float:
    started = time.perf_counter()
    result = subprocess.run(command, input=stdin, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return elapsed * 1000


def summary(name: str, samples: list[float], goal: str = "") -> None:
    report(f"{name} p50", percentile(samples, 50), "ms", goal)
    report(f"{name} p95", percentile(samples, 95), "ms")
    report(f"{name} max", max(samples), "ms")


def make_cgroup(name: str, pid: int) -> tuple[Path, str]:
    """A cgroup of ours holding `pid`: in the v1 cpuset hierarchy, or in cgroup v2 (the agent's detection)."""
    v1 = CGROUP_ROOT / "cpuset"
    if cgroup_version() == 1:
        directory, cpus = v1 / name, (v1 / "cpuset.cpus").read_text().strip()
        directory.mkdir()
        (directory / "cpuset.mems").write_text((v1 / "cpuset.mems").read_text())
        (directory / "cpuset.cpus").write_text(cpus)
    elif "cpuset" in (CGROUP_ROOT / "cgroup.controllers").read_text().split():
        (CGROUP_ROOT / "cgroup.subtree_control").write_text("+cpuset")
        directory, cpus = CGROUP_ROOT / name, (CGROUP_ROOT / "cpuset.cpus.effective").read_text().strip()
        directory.mkdir()
    else:
        raise SystemExit("cdihook_bench: no cpuset controller (cgroup v1 cpuset or v2 with cpuset)")
    (directory / "cgroup.procs").write_text(str(pid))
    return directory, cpus


def spawn(command: HookCommand, cpu_list: str) -> list[str]:
    """What the runtime execs: the hook's path, with its argv[0] replaced by that path."""
    return [command.path, *command.argv(cpu_list)[1:]]


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("cdihook_bench: needs root (it makes a cgroup)")
    sleeper = subprocess.Popen(["sleep", "600"])
    directory: Path | None = None
    with tempfile.TemporaryDirectory(prefix="kn-cdibench-") as scratch:
        try:
            directory, all_cpus = make_cgroup(f"kncdibench{uuid.uuid4().hex[:8]}", sleeper.pid)
            bundle = Path(scratch) / "oci-bundle"
            bundle.mkdir()
            (bundle / "config.json").write_text(json.dumps({"linux": {"cgroupsPath": f"/{directory.name}"}}))
            state = json.dumps({"ociVersion": "1.0.2", "pid": sleeper.pid, "bundle": str(bundle)})
            first = str(min(int(cpu) for cpu in all_cpus.replace("-", ",").split(",")))
            hook = spawn(this_interpreter(), first)
            bundled = spawn(install(Path(scratch) / "cdi-hook"), first)
            for command in (hook, bundled):
                timed(command, state)  # warm the page cache once, as a node that has run a container has
            # Interleaved, so that a change of load touches every series alike.
            series: dict[str, list[float]] = {"hook": [], "bundle": [], "isolated": [], "bare": []}
            for _ in range(RUNS):
                series["hook"].append(timed(hook, state))
                series["bundle"].append(timed(bundled, state))
                series["isolated"].append(timed([INTERPRETER, "-I", "-S", "-c", "pass"]))
                series["bare"].append(timed([INTERPRETER, "-c", "pass"]))
            assert (directory / "cpuset.cpus").read_text().strip() == first
        finally:
            sleeper.kill()
            sleeper.wait()
            if directory is not None and directory.exists():
                directory.rmdir()
    print(
        f"{' '.join(hook)}: {RUNS} runs each, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    summary("cdi-hook: spawn to exit", series["hook"], "<= 50 ms")
    summary("cdi-hook (DaemonSet bundle): spawn to exit", series["bundle"])
    summary("python -I -S -c pass (interpreter start, the floor)", series["isolated"])
    summary("python -c pass (interpreter start)", series["bare"])
    floor = percentile(series["isolated"], 95)
    report(
        "cdi-hook p95 / -I -S -c pass p95", percentile(series["hook"], 95) / floor, "x", f"<= {RATIO_GOAL}"
    )
    report(
        "cdi-hook (DaemonSet bundle) p95 / -I -S -c pass p95",
        percentile(series["bundle"], 95) / floor,
        "x",
        f"<= {RATIO_GOAL}",
    )


if __name__ == "__main__":
    main()
