"""What one hollow node costs, idle and with its pods running: this tree's fleet beside a baseline's, at once.

One `kubenode apiserver` (this tree's), no scheduler: pods are created bound (`spec.nodeName`), so each node
gets exactly `--pods-per-node`. One `python -m agent.hollow` fleet of `--nodes` from this tree and, with
`--baseline DIR` (a `git worktree` of an older commit with its own venv), a second fleet of the same size from
that tree, beside it against the same server: both are measured over the same windows, so the machine's
neighbours weigh on both alike (an A/B in one run). Flow: every Node Ready, a settle, then an idle window
(heartbeats only), then every pod created at `--rate`/s and waited for Running, a settle, and a window with
every pod running and none arriving. Printed, per fleet: a node's CPU per second in each window (the fleet
process's user + system time over the window, divided by its nodes), its wake-ups per second (the process's
voluntary context switches: under gevent each is its one thread woken from epoll, and on this machine a
wake-up costs tens of microseconds of CPU on its own), its RSS, and the ratios this / baseline; the API calls
per node and minute in each window (every fleet's together); and the 1-minute load average (median and
maximum, sampled every 5 s) of each window. `--sample-stacks PREFIX` writes each fleet's cProfile (by CPU
time, under gevent) to PREFIX-<fleet>.pstats: of the steady window only (the fleet restarts its profile on
SIGUSR1 as the window begins and writes it when stopped at its end); with cProfile's own cost: take figures
from a run without.

    .venv/bin/python benchmarks/hollow_node_cost_bench.py [--nodes 50] [--pods-per-node 30] [--baseline DIR]
        [--idle 30] [--steady 60] [--sample-stacks /tmp/x]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cluster_scale_bench import LoadLog, api_latencies, scrape_apiserver  # noqa: E402

from harness.apiserver import ApiServerProcess  # noqa: E402
from kubenode.kubeclient import NODES, PODS, KubeClient, load_kubeconfig  # noqa: E402

NAMESPACE = "default"
SENDERS = 8
SETTLE_S = 15.0  # after the last node is Ready, or the last pod Running: the start-up work drains


def bound_pod(name: str, node: str) -> dict[str, object]:
    """kube's density pod (a pause container, small requests), bound to its node at creation."""
    requests = {"cpu": "10m", "memory": "10Mi"}
    container = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.10",
        "command": ["/pause"],
        "resources": {"requests": requests, "limits": requests},
    }
    spec = {"nodeName": node, "containers": [container], "terminationGracePeriodSeconds": 1}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


class Fleet:
    """One `python -m agent.hollow` process of `nodes` nodes, from `tree` (its own venv and code)."""

    def __init__(
        self, label: str, tree: Path, kubeconfig: Path, nodes: int, workdir: Path, profile: Path | None
    ) -> None:
        self.label = label
        self.nodes = nodes
        self.prefix = f"hollow-{label}-"
        python = tree / ".venv" / "bin" / "python"
        command = [str(python), "-m", "agent.hollow", "--kubeconfig", str(kubeconfig), "--nodes", str(nodes)]
        command += ["--prefix", self.prefix, "--state-dir", str(workdir / f"state-{label}")]
        if profile is not None:
            command += ["--sample-stacks", str(profile)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, text=True)
        self.ps = psutil.Process(self.process.pid)

    def wait_ready(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("ready "):
            raise SystemExit(f"the {self.label} fleet did not start: {line!r}")

    def node_names(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(self.nodes)]

    def cpu_seconds(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def system_seconds(self) -> float:
        return float(self.ps.cpu_times().system)

    def sleeps(self) -> int:
        """The process's voluntary context switches: how often it blocked (under gevent: its one thread
        waiting in epoll for the next timer or socket), so how often it was woken."""
        return int(self.ps.num_ctx_switches().voluntary)

    def rss_mib(self) -> float:
        return float(self.ps.memory_info().rss) / 2**20

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def wait_for(condition: object, timeout: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(2.0)


def ready_nodes(client: KubeClient) -> int:
    items, _ = client.list_all(NODES)
    return sum(
        any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
        for n in items
    )


def running_pods(client: KubeClient) -> int:
    items, _ = client.list_all(PODS, NAMESPACE)
    return sum((p.get("status") or {}).get("phase") == "Running" for p in items)


@dataclass
class Window:
    cpu: dict[str, float]  # by fleet: CPU per node, ms/s
    system: dict[str, float]  # by fleet: the part of it in the kernel
    wakes: dict[str, float]  # by fleet: wake-ups of its process per node and second
    load: str  # the load average meanwhile, median / max
    calls: dict[str, float]  # API calls per node and minute (every fleet's), by verb and resource


def window(api: ApiServerProcess, fleets: list[Fleet], seconds: float) -> Window:
    """Each fleet's CPU and wake-ups per node over `seconds`, the load average meanwhile, and the API calls
    the server served per node and minute (every fleet's together), by verb and resource."""
    load_at_start = os.getloadavg()[0]
    load = LoadLog()
    scraped = scrape_apiserver(api)
    before = {f.label: (f.cpu_seconds(), f.sleeps(), f.system_seconds()) for f in fleets}
    began = time.monotonic()
    time.sleep(seconds)
    spent = time.monotonic() - began
    cpu = {f.label: (f.cpu_seconds() - before[f.label][0]) / spent / f.nodes * 1000 for f in fleets}
    wakes = {f.label: (f.sleeps() - before[f.label][1]) / spent / f.nodes for f in fleets}
    system = {f.label: (f.system_seconds() - before[f.label][2]) / spent / f.nodes * 1000 for f in fleets}
    nodes = sum(f.nodes for f in fleets)
    calls = {k: n / nodes / spent * 60 for k, (n, _) in api_latencies(scraped, scrape_apiserver(api)).items()}
    loads = [load_at_start, *load.stop()]
    return Window(cpu, system, wakes, f"{statistics.median(loads):.1f} / {max(loads):.1f}", calls)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=50, help="hollow nodes in each fleet (50)")
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--rate", type=float, default=50.0, help="pod creates per second (50)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of the idle window (30)")
    parser.add_argument(
        "--steady", type=float, default=60.0, help="seconds of the window with pods running (60)"
    )
    parser.add_argument(
        "--baseline", type=Path, help="a worktree (with .venv) whose fleet runs beside this one"
    )
    parser.add_argument(
        "--sample-stacks", help="a path prefix: each fleet's profile goes to PREFIX-<fleet>.pstats"
    )
    args = parser.parse_args()
    if args.baseline is not None and not (args.baseline / ".venv" / "bin" / "python").exists():
        raise SystemExit(f"--baseline: {args.baseline}: no .venv/bin/python there")
    trees = {"new": ROOT} | ({"base": args.baseline.resolve()} if args.baseline else {})
    workdir = Path(tempfile.mkdtemp(prefix="kubenode-hollowcost-", dir="/dev/shm"))
    fleets: list[Fleet] = []
    api = ApiServerProcess()
    client = KubeClient(load_kubeconfig(api.kubeconfig), pool_size=SENDERS + 4, timeout=120)
    try:
        for label, tree in trees.items():
            profile = Path(f"{args.sample_stacks}-{label}.pstats") if args.sample_stacks else None
            fleets.append(Fleet(label, tree, api.kubeconfig, args.nodes, workdir, profile))
        for fleet in fleets:
            fleet.wait_ready()
        total_nodes = args.nodes * len(fleets)
        wait_for(lambda: ready_nodes(client) == total_nodes, 180, f"{total_nodes} Ready nodes")
        time.sleep(SETTLE_S)
        idle = window(api, fleets, args.idle)
        idle_rss = {f.label: f.rss_mib() / f.nodes for f in fleets}
        names = [
            (f"{f.label}-{n}-{k}", n)
            for k in range(args.pods_per_node)
            for f in fleets
            for n in f.node_names()
        ]
        began = time.monotonic()
        with ThreadPoolExecutor(SENDERS) as pool:
            futures = []
            for i, (name, node) in enumerate(names):
                delay = began + i / args.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(client.create, PODS, bound_pod(name, node), NAMESPACE))
            for future in futures:
                future.result()
        wait_for(lambda: running_pods(client) == len(names), 600, f"{len(names)} pods Running")
        time.sleep(SETTLE_S)
        if args.sample_stacks:
            for fleet in fleets:
                fleet.process.send_signal(signal.SIGUSR1)
        steady = window(api, fleets, args.steady)
        steady_rss = {f.label: f.rss_mib() / f.nodes for f in fleets}
    finally:
        for fleet in fleets:
            fleet.stop()
        client.close()
        api.stop()
        api.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{args.nodes} hollow nodes a fleet, {args.pods_per_node} pods a node; fleets: {', '.join(trees)}")
    print(f"load average, idle window (median / max) {idle.load}")
    print(f"load average, pods running (median / max) {steady.load}")
    for name, seen in (("idle", idle), ("pods running", steady)):
        counted = ", ".join(f"{key} {n:.2f}" for key, n in sorted(seen.calls.items()))
        print(f"API calls per node and minute, {name} (all fleets): {counted}")
    for label in trees:
        print(f"one hollow node, {label}: CPU idle | ms/s {idle.cpu[label]:.3f}")
        print(f"one hollow node, {label}: CPU with its pods running | ms/s {steady.cpu[label]:.3f}")
        print(
            f"one hollow node, {label}: of which in the kernel, idle / pods running | ms/s "
            f"{idle.system[label]:.3f} / {steady.system[label]:.3f}"
        )
        print(f"one hollow node, {label}: wake-ups idle | /s {idle.wakes[label]:.2f}")
        print(f"one hollow node, {label}: wake-ups with its pods running | /s {steady.wakes[label]:.2f}")
        rss = f"{idle_rss[label]:.2f} / {steady_rss[label]:.2f}"
        print(f"one hollow node, {label}: RSS idle / with its pods | MiB {rss}")
    if "base" in trees:
        print(f"new / base: CPU idle | x {idle.cpu['new'] / idle.cpu['base']:.2f}")
        print(f"new / base: CPU with its pods running | x {steady.cpu['new'] / steady.cpu['base']:.2f}")


if __name__ == "__main__":
    main()
