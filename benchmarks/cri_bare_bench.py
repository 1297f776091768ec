"""CRI pods through the agent against a bare CRI client, on one containerd, in turns (needs root, containerd:
`make containerd-deps`).

One containerd with a private config (harness/containerd.py), one `kubenode apiserver` and one agent joined
to it with `containerRuntimeEndpoint`. Then ROUNDS turns, each the bare client's then the agent's, so that the
machine's other load weighs on both:
- agent: POD_COUNT busybox pods (cri_bench.py's pod: BestEffort, `sleep`) created in the API at once, on the
  agent's node; each timed from its create call until a watch sees it Running. The agent process's CPU
  over the turn is read from /proc. Then the pods are deleted and the turn waits until the API has none
  and containerd holds none of the agent's sandboxes;
- bare: the same POD_COUNT sandboxes and containers started at once by a minimal CRI client (barecri.py:
  RunPodSandbox, CreateContainer, StartContainer with the same image, command and cgroup layout), each
  timed from its first call until StartContainer answers; then stopped and removed.
Prints both sides' create -> Running p50 and p99 over all turns, the agent p99 / bare p99 ratio (issue 42's
goal: <= 1.5), the agent's CPU per CRI pod (until Running) beside the bare client's, and containerd's CPU
per pod on each side (its teardown included). Everything it makes (pods, sandboxes, cgroups, directories)
is removed at the end.

    .venv/bin/python benchmarks/cri_bare_bench.py [--pods 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from barecri import BARE_NODE, BareCRI
from benchstats import percentile, report
from cgroupfloor import RawCgroups
from cri_bench import node_agent, pod

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # harness/ lives at the repository root

from harness.agent import AgentProcess, close_reporting_leaks
from harness.apiserver import ApiServerProcess
from harness.cgroupfs import sweep_root
from harness.containerd import ContainerdProcess
from harness.ociimage import BUSYBOX_IMAGE
from kubenode.kubeclient import PODS, KubeClient, load_kubeconfig
from kubenode.kubeclient.informer import Informer

POD_COUNT = 30
ROUNDS = 3
RUNNING_DEADLINE_S = 180.0
GONE_DEADLINE_S = 120.0
# The agent's INFO lines (agent/kuberuntime/cri/runtime.py) that mark its CRI calls answered, with
# logging's asctime; they split its create -> Running into where the time goes.
_LOGGED = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO \S+: pod default/(?P<name>[^ :]+)"
    r"(?::(?P<sandbox> sandbox \S+ running)| container main (?P<started>started))"
)


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


class PodWatch:
    """Running and deleted pods of the default namespace as a watch delivers them, for waits on events."""

    def __init__(self, admin: KubeClient) -> None:
        self.running: dict[str, float] = {}
        self.deleted: set[str] = set()
        self.changed = threading.Condition()
        self._informer: Informer[dict[str, Any]] = Informer(
            admin,
            PODS,
            namespace="default",
            on_add=self._seen,
            on_update=lambda _old, new: self._seen(new),
            on_delete=self._gone,
        )

    def __enter__(self) -> PodWatch:
        self._informer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._informer.stop()

    def _seen(self, obj: dict[str, Any]) -> None:
        if (obj.get("status") or {}).get("phase") == "Running":
            with self.changed:
                self.running.setdefault(obj["metadata"]["name"], time.monotonic())
                self.changed.notify_all()

    def _gone(self, obj: dict[str, Any]) -> None:
        with self.changed:
            self.deleted.add(obj["metadata"]["name"])
            self.changed.notify_all()

    def wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(done, timeout):
                raise SystemExit(f"cri_bare_bench: {what} within {timeout:.0f} s")


def logged_calls(agent: AgentProcess, names: list[str]) -> dict[str, dict[str, float]]:
    """Pod name -> {"sandbox": wall time RunPodSandbox answered, "started": StartContainer's}, from the
    agent's log (read by AgentProcess's thread, which may be a line or two behind the watch)."""
    wanted = set(names)
    deadline = time.monotonic() + 10
    while True:
        found: dict[str, dict[str, float]] = {}
        for line in list(agent.output):
            match = _LOGGED.match(line)
            if match and match["name"] in wanted:
                at = datetime.datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                found.setdefault(match["name"], {})["sandbox" if match["sandbox"] else "started"] = at
        missing = [n for n in names if len(found.get(n, {})) != 2]
        if not missing:
            return found
        if time.monotonic() > deadline:
            raise SystemExit(f"cri_bare_bench: the agent's log lacks the sandbox/started lines of {missing}")
        time.sleep(0.05)


def agent_turn(
    admin: KubeClient, agent: AgentProcess, watch: PodWatch, bare: BareCRI, prefix: str, side: Side, pods: int
) -> tuple[list[float], float]:
    """Each pod's create -> Running seconds through the agent, and the agent's CPU seconds for the turn;
    the phases of each go to `side`."""
    assert agent.process is not None
    process = psutil.Process(agent.process.pid)
    names = [f"{prefix}-{i}" for i in range(pods)]
    created: dict[str, float] = {}
    wall = time.time() - time.monotonic()  # the log's clock is the wall clock

    def create(name: str) -> None:
        created[name] = time.monotonic()
        admin.create(PODS, pod(name, agent.node, process=False), "default")

    cpu_before = cpu_seconds(process)
    with ThreadPoolExecutor(pods) as pool:
        list(pool.map(create, names))
    watch.wait(lambda: all(n in watch.running for n in names), RUNNING_DEADLINE_S, f"{prefix}: pods Running")
    cpu = cpu_seconds(process) - cpu_before
    for name, calls in logged_calls(agent, names).items():
        side.add("API create -> RunPodSandbox answered", calls["sandbox"] - wall - created[name])
        side.add("RunPodSandbox -> StartContainer answered", calls["started"] - calls["sandbox"])
        side.add("StartContainer -> Running seen in the API", watch.running[name] + wall - calls["started"])
    for name in names:
        admin.delete(PODS, name, "default")
    watch.wait(lambda: all(n in watch.deleted for n in names), GONE_DEADLINE_S, f"{prefix}: pods deleted")
    deadline = time.monotonic() + GONE_DEADLINE_S
    while bare.sandboxes(agent.node):  # the next turn starts on an equally empty runtime
        if time.monotonic() > deadline:
            raise SystemExit(f"cri_bare_bench: {prefix}: the agent's sandboxes are still there")
        time.sleep(0.1)
    return [watch.running[n] - created[n] for n in names], cpu


def bare_turn(bare: BareCRI, prefix: str, side: Side, pods: int) -> tuple[list[float], float]:
    """Each pod's first call -> StartContainer answered seconds, and this process's CPU seconds for it;
    the phases of each go to `side`."""
    command = pod("x", "x", process=False)["spec"]["containers"][0]["command"]

    def start(name: str) -> tuple[str, float]:
        started = time.monotonic()
        sandbox, sandbox_ready = bare.start_pod(name, BUSYBOX_IMAGE, command)
        done = time.monotonic()
        side.add("RunPodSandbox", sandbox_ready - started)
        side.add("CreateContainer + StartContainer", done - sandbox_ready)
        return sandbox, done - started

    cpu_before = time.process_time()
    with ThreadPoolExecutor(pods) as pool:
        results = list(pool.map(start, [f"{prefix}-{i}" for i in range(pods)]))
    cpu = time.process_time() - cpu_before
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(bare.remove_pod, [sandbox for sandbox, _ in results]))
    if bare.sandboxes(BARE_NODE):
        raise SystemExit(f"cri_bare_bench: {prefix}: sandboxes left after removing them")
    return [seconds for _, seconds in results], cpu


@dataclass
class Side:
    """What one side's turns add up to: each pod's seconds, its client's CPU and containerd's CPU."""

    samples: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    runtime_cpu_s: float = 0.0
    phases: dict[str, list[float]] = field(default_factory=dict)

    def add(self, phase: str, seconds: float) -> None:
        self.phases.setdefault(phase, []).append(seconds)


def run_turns(
    containerd: ContainerdProcess, api: ApiServerProcess, bare_root: str, logs: Path, pods: int, rounds: int
) -> tuple[Side, Side]:
    """The agent's and the bare client's sides after `rounds` turns each; raises on a leak."""
    agent_side, bare_side = Side(), Side()
    admin = KubeClient(load_kubeconfig(api.kubeconfig))
    agent = node_agent(api, containerd)
    bare = BareCRI(containerd.endpoint, bare_root, logs)
    status = 1
    try:
        RawCgroups().make_tier(f"{bare_root}/kubepods/besteffort")  # a node's tiers exist before its pods
        agent.start()
        assert containerd.process is not None
        runtime = psutil.Process(containerd.process.pid)
        with PodWatch(admin) as watch:
            for turn in range(rounds):
                print(f"turn {turn + 1}/{rounds}, load average {os.getloadavg()[0]:.2f}", flush=True)
                for side in (bare_side, agent_side):
                    before = cpu_seconds(runtime)
                    if side is bare_side:
                        samples, cpu = bare_turn(bare, f"bare{turn}", side, pods)
                    else:
                        samples, cpu = agent_turn(admin, agent, watch, bare, f"agent{turn}", side, pods)
                    side.samples += samples
                    side.cpu_s += cpu
                    side.runtime_cpu_s += cpu_seconds(runtime) - before
        print(f"load average at the end {os.getloadavg()[0]:.2f}", flush=True)
        status = 0
    finally:
        bare.close()
        status = close_reporting_leaks(agent, admin) or status
    if status:
        raise SystemExit("cri_bare_bench: the agent left cgroups behind")
    return agent_side, bare_side


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=POD_COUNT, help="pods started at once in each turn")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="turns of each side")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("cri_bare_bench needs root (containerd, cgroups)", file=sys.stderr)
        return 1
    bare_root = f"kn-bare-{uuid.uuid4().hex[:8]}"
    logs = Path(tempfile.mkdtemp(prefix="kn-bare-logs-"))
    try:
        with ContainerdProcess() as containerd, ApiServerProcess() as api:
            agent, bare = run_turns(containerd, api, bare_root, logs, args.pods, args.rounds)
    finally:
        left = sweep_root(bare_root)
        shutil.rmtree(logs, ignore_errors=True)
    if left:
        print(f"cgroups left behind: {left}", file=sys.stderr)
        return 1
    for name, side in (("through the agent", agent), ("bare CRI client", bare)):
        for p in (50, 99):
            label = f"CRI pod create -> Running p{p}, {name} ({args.pods} at once)"
            report(label, percentile(side.samples, p), "s")
    for name, side in (("through the agent", agent), ("bare CRI client", bare)):
        for phase, seconds in side.phases.items():
            report(f"  {name}: {phase} p50", percentile(seconds, 50), "s")
    ratio = percentile(agent.samples, 99) / percentile(bare.samples, 99)
    report("agent p99 / bare CRI client p99", ratio, "x", "<= 1.5 x")
    started = args.pods * args.rounds
    report("agent CPU per CRI pod", agent.cpu_s / started * 1000, "ms")
    report("bare CRI client CPU per pod", bare.cpu_s / started * 1000, "ms")
    report("containerd CPU per pod, through the agent", agent.runtime_cpu_s / started * 1000, "ms")
    report("containerd CPU per pod, bare CRI client", bare.runtime_cpu_s / started * 1000, "ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
