"""Latency of the CDI createRuntime hook, as a runtime sees it: spawn to exit of `kubenode cdi-hook`.

The hook runs on every start of a pinned container, so its goal is <= 50 ms. Each run pins a real
`sleep` process in a real cgroup v1 cpuset (a cgroup of our own, removed at the end) through the installed
`kubenode` console script, exactly as the CDI spec names it. For scale, the bare interpreter's start.
Needs root and the cgroup v1 cpuset hierarchy (as on the project's machines).
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
CPUSET = Path("/sys/fs/cgroup/cpuset")
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


def main() -> None:
    if not (CPUSET / "cpuset.cpus").exists() or os.geteuid() != 0:
        raise SystemExit(
            "cdihook_bench: needs root and the cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset"
        )
    cgroup = CPUSET / f"kncdibench{uuid.uuid4().hex[:8]}"
    all_cpus = (CPUSET / "cpuset.cpus").read_text().strip()
    sleeper = subprocess.Popen(["sleep", "600"])
    with tempfile.TemporaryDirectory(prefix="kn-cdibench-") as bundle:
        try:
            cgroup.mkdir()
            (cgroup / "cpuset.mems").write_text((CPUSET / "cpuset.mems").read_text())
            (cgroup / "cpuset.cpus").write_text(all_cpus)
            (cgroup / "cgroup.procs").write_text(str(sleeper.pid))
            (Path(bundle) / "config.json").write_text(
                json.dumps({"linux": {"cgroupsPath": f"/{cgroup.name}"}})
            )
            state = json.dumps({"ociVersion": "1.0.2", "pid": sleeper.pid, "bundle": bundle})
            first = min(int(cpu) for cpu in all_cpus.replace("-", ",").split(","))
            hook = [str(KUBENODE), "cdi-hook", "cpuset", "--cpus", str(first)]
            timed(hook, state)  # warm the page cache once, as a node that has run a container has
            samples = [timed(hook, state) for _ in range(RUNS)]
            assert (cgroup / "cpuset.cpus").read_text().strip() == str(first)
            bare = [timed([sys.executable, "-c", "pass"]) for _ in range(RUNS)]
        finally:
            sleeper.kill()
            sleeper.wait()
            if cgroup.exists():
                cgroup.rmdir()
    print(f"kubenode cdi-hook cpuset, {RUNS} runs each, {os.cpu_count()} CPUs", flush=True)
    summary("cdi-hook: spawn to exit", samples, "<= 50 ms")
    summary("python -c pass (interpreter start)", bare)


if __name__ == "__main__":
    main()
