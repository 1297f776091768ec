"""Latency of the CDI createRuntime hook, as a runtime sees it: spawn to exit of `kubenode cdi-hook`.

The hook runs on every start of a pinned container, so its goal is <= 50 ms. Each run pins a real
`sleep` process in a real cgroup v1 cpuset (a cgroup of our own, removed at the end) through the installed
`kubenode` console script, exactly as the CDI spec names it. For scale, the bare interpreter's start.
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

RUNS = 60
CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBENODE = Path(sys.executable).parent / "kubenode"


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
    """A cgroup of ours holding `pid`: in the v1 cpuset hierarchy if mounted, else in cgroup v2."""
    v1 = CGROUP_ROOT / "cpuset"
    if (v1 / "cpuset.cpus").exists():
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


def main() -> None:
    if os.geteuid() != 0:
        raise SystemExit("cdihook_bench: needs root (it makes a cgroup)")
    # The console script, as the CDI spec names it; where it is not installed, what its body does.
    console_script = "import sys; from cli.main import main; sys.exit(main())"
    hook_program = [str(KUBENODE)] if KUBENODE.exists() else [sys.executable, "-c", console_script]
    sleeper = subprocess.Popen(["sleep", "600"])
    directory: Path | None = None
    with tempfile.TemporaryDirectory(prefix="kn-cdibench-") as bundle:
        try:
            directory, all_cpus = make_cgroup(f"kncdibench{uuid.uuid4().hex[:8]}", sleeper.pid)
            (Path(bundle) / "config.json").write_text(
                json.dumps({"linux": {"cgroupsPath": f"/{directory.name}"}})
            )
            state = json.dumps({"ociVersion": "1.0.2", "pid": sleeper.pid, "bundle": bundle})
            first = min(int(cpu) for cpu in all_cpus.replace("-", ",").split(","))
            hook = [*hook_program, "cdi-hook", "cpuset", "--cpus", str(first)]
            timed(hook, state)  # warm the page cache once, as a node that has run a container has
            samples = [timed(hook, state) for _ in range(RUNS)]
            assert (directory / "cpuset.cpus").read_text().strip() == str(first)
            bare = [timed([sys.executable, "-c", "pass"]) for _ in range(RUNS)]
        finally:
            sleeper.kill()
            sleeper.wait()
            if directory is not None and directory.exists():
                directory.rmdir()
    print(
        f"{' '.join(hook)}: {RUNS} runs each, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    summary("cdi-hook: spawn to exit", samples, "<= 50 ms")
    summary("python -c pass (interpreter start)", bare)


if __name__ == "__main__":
    main()
