"""kube's density test on hollow nodes: `kubenode apiserver`, the live scheduler and N hollow nodes.

For each N (default 100, 500, 1000): a fresh API server, `kubenode scheduler run`, and N hollow
nodes in `python -m agent.hollow` processes of `--nodes-per-process` (50) each (the real agent
code, pretend processes; agent/hollow/). Once
every Node is Ready the fleet idles for a while (Leases, node status) to measure what one hollow
node costs; then `--pods-per-node` x N pods (default 30, as kube's density test) are created
unbound at `--rate` pods/s, scheduled, run, and deleted again at the same rate (or `--delete-rate`:
kube's density test deletes its pods all at once, through their controllers). Printed per N:
- pod startup latency p50/p90/p99: from sending the create to a watch seeing the pod Running
  (kube's SLO: p99 <= 5 s);
- API call latency p99 by verb and resource, from the API server's own
  apiserver_request_duration_seconds over the run (histogram_quantile within kube's buckets;
  kube's SLO: <= 1 s for single objects, <= 30 s for cluster-wide lists);
- the API server's peak RSS and CPU seconds, the scheduler's throughput (bindings/s while pods
  arrived) and CPU, the hollow processes' RSS, CPU and threads per node;
and at the end the growth of each figure from the smallest N to each larger one.
Checks (a failure exits non-zero): every pod was seen Running exactly once, on the node it was bound
to and never another; the ledger shows each started exactly once on that node; every deletion
reached its node (a stop in the ledger, the pod gone from the API).

    .venv/bin/python benchmarks/cluster_scale_bench.py [--nodes 100 500 1000] [--pods-per-node 30] [--rate 50]
        [--delete-rate R] [--drivers gevent threads]
        [--nodes-per-process 50] [--fleet-arg=--max-connections=64 ...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import psutil
from benchstats import percentile, report
from scheduler_e2e_bench import free_port, ready, wait_until

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.apiserver import ApiServerProcess  # noqa: E402
from kubenode.kubeclient import NODES, PODS, KubeClient, NotFound, load_kubeconfig  # noqa: E402
from kubenode.kubeclient.informer import Informer  # noqa: E402

NAMESPACE = "default"
IDLE_SECONDS = 20.0  # heartbeats only: one and a half Lease periods per node
STEADY_SECONDS = 20.0  # every pod Running, before the deletes
SENDERS = 16


def density_pod(name: str) -> dict[str, Any]:
    """kube's density pod: a pause container with small requests (and a command: the agent runs processes)."""
    requests = {"cpu": "10m", "memory": "10Mi"}
    container = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.10",
        "command": ["/pause"],
        "resources": {"requests": requests, "limits": requests},
    }
    spec = {"containers": [container], "terminationGracePeriodSeconds": 1}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


class PodFacts(NamedTuple):
    name: str
    uid: str
    node: str
    phase: str


def pod_facts(obj: dict[str, Any]) -> PodFacts:
    meta = obj.get("metadata") or {}
    return PodFacts(
        meta.get("name", ""),
        meta.get("uid", ""),
        (obj.get("spec") or {}).get("nodeName") or "",
        (obj.get("status") or {}).get("phase") or "",
    )


class PodLog:
    """Every pod, through the shared client layer's informer (list, watch, resume after the server closes a
    lagging watch, relist after 410): when each was bound and to which node(s), each phase change into
    Running, when it was deleted."""

    def __init__(self, client: KubeClient) -> None:
        self.bound: dict[str, float] = {}
        self.nodes: dict[str, set[str]] = {}
        self.uids: dict[str, str] = {}
        self.phase: dict[str, str] = {}
        self.running: dict[str, float] = {}
        self.running_count: Counter[str] = Counter()
        self.deleted: dict[str, float] = {}
        self.lock = threading.Lock()
        self._informer: Informer[PodFacts] = Informer(
            client,
            PODS,
            decode=pod_facts,
            on_add=self._seen,
            on_update=lambda _old, pod: self._seen(pod),
            on_delete=lambda pod: self._seen(pod, deleted=True),
            watch_timeout_s=3600,
            name="bench-pods",
        )
        self._informer.start()
        if not self._informer.wait_for_sync(60):
            raise SystemExit("the benchmark's pod watch did not sync in 60 s")

    def _seen(self, pod: PodFacts, deleted: bool = False) -> None:
        now = time.perf_counter()
        name = pod.name
        with self.lock:
            self.uids[name] = pod.uid
            if pod.node:
                self.bound.setdefault(name, now)
                self.nodes.setdefault(name, set()).add(pod.node)
            if deleted:
                self.deleted.setdefault(name, now)
                return
            if pod.phase == "Running" and self.phase.get(name) != "Running":
                self.running_count[name] += 1
                self.running.setdefault(name, now)
            self.phase[name] = pod.phase

    def close(self) -> None:
        self._informer.stop()


def at_steady_rate(rate: float, names: list[str], action: Any) -> dict[str, float]:
    """Call action(name) for each name at `rate` per second (SENDERS threads); when each was sent."""
    sent: dict[str, float] = {}
    start = time.perf_counter()
    with ThreadPoolExecutor(SENDERS) as pool:
        futures = []
        for i, name in enumerate(names):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            sent[name] = time.perf_counter()
            futures.append(pool.submit(action, name))
        for future in futures:
            future.result()
    return sent


def scrape_apiserver(api: ApiServerProcess) -> str:
    request = urllib.request.Request(api.url + "/metrics", headers={"Authorization": f"Bearer {api.token}"})
    context: ssl.SSLContext = api.ssl_context()
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        return str(response.read().decode())


def request_buckets(text: str) -> dict[str, dict[float, float]]:
    """apiserver_request_duration_seconds: cumulative bucket counts per 'VERB resource[/subresource]'."""
    result: dict[str, dict[float, float]] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_duration_seconds_bucket{"):
            continue
        labels_text, count = line.rsplit(" ", 1)
        labels = dict(
            part.split("=", 1)
            for part in labels_text[labels_text.index("{") + 1 : -1].split(",")
            if "=" in part
        )
        labels = {k: v.strip('"') for k, v in labels.items()}
        key = f"{labels['verb']} {labels['resource']}" + (
            f"/{labels['subresource']}" if labels["subresource"] else ""
        )
        le = labels["le"]
        result.setdefault(key, {})[float("inf") if le == "+Inf" else float(le)] = float(count)
    return result


def quantile(buckets: dict[float, float], q: float) -> float:
    """histogram_quantile: linear within the bucket the rank falls in."""
    ordered = sorted(buckets.items())
    total = ordered[-1][1] if ordered else 0.0
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if bound == float("inf"):
                return lower
            span = count - below
            return lower + (bound - lower) * ((rank - below) / span if span else 1.0)
        lower, below = bound, count
    return float("nan")


def api_latencies(before: str, after: str) -> dict[str, tuple[float, float]]:
    """(calls, p99 seconds) per verb and resource between two scrapes."""
    first, last = request_buckets(before), request_buckets(after)
    result = {}
    for key, buckets in last.items():
        delta = {bound: count - first.get(key, {}).get(bound, 0.0) for bound, count in buckets.items()}
        calls = max(delta.values(), default=0.0)
        if calls > 0:
            result[key] = (calls, quantile(delta, 0.99))
    return result


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


class Cluster:
    """The API server, the scheduler and the hollow fleet of one run."""

    def __init__(
        self, api: ApiServerProcess, nodes: int, per_process: int, workdir: Path, fleet_args: list[str]
    ) -> None:
        self.api = api
        self.client = KubeClient(load_kubeconfig(api.kubeconfig), pool_size=SENDERS + 8, timeout=120)
        port = free_port()
        scheduler_cmd = [sys.executable, "-m", "cli.main", "--log-level", "WARNING", "scheduler", "run"]
        scheduler_cmd += ["--kubeconfig", str(api.kubeconfig), "--metrics-bind-address", f"127.0.0.1:{port}"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.scheduler = subprocess.Popen(scheduler_cmd, cwd=ROOT, env=env)
        wait_until(lambda: ready(port), 120, "the scheduler's informers to sync")
        # Several fleet processes of at most `per_process` nodes: each process has one GIL, and past a few
        # hundred nodes' threads in one (on this shared 2-core machine) starve each other (docs/scale.md).
        self.ledgers: list[Path] = []
        self.fleets: list[subprocess.Popen[str]] = []
        for k, first in enumerate(range(0, nodes, per_process)):
            count = min(per_process, nodes - first)
            self.ledgers.append(workdir / f"ledger-{k}")
            fleet_cmd = [sys.executable, "-m", "agent.hollow", "--kubeconfig", str(api.kubeconfig)]
            fleet_cmd += [
                "--nodes",
                str(count),
                "--prefix",
                f"hollow-{k}-",
                "--ledger",
                str(self.ledgers[-1]),
            ]
            fleet_cmd += ["--state-dir", str(workdir / f"state-{k}"), *fleet_args]
            if "--sample-stacks" in fleet_args:  # a file per process: the path with the process's number
                at = fleet_cmd.index("--sample-stacks") + 1
                given = Path(fleet_cmd[at])
                fleet_cmd[at] = str(given.with_name(f"{given.stem}-{nodes}-{k}{given.suffix}"))
            self.fleets.append(
                subprocess.Popen(fleet_cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
            )
        for fleet in self.fleets:
            assert fleet.stdout is not None
            if not fleet.stdout.readline().startswith("ready "):
                raise SystemExit("a hollow fleet did not start")
        assert api.process is not None
        self.procs = {
            "apiserver": [psutil.Process(api.process.pid)],
            "scheduler": [psutil.Process(self.scheduler.pid)],
            "hollow": [psutil.Process(fleet.pid) for fleet in self.fleets],
        }

    def cpu(self) -> dict[str, float]:
        return {name: sum(cpu_seconds(proc) for proc in procs) for name, procs in self.procs.items()}

    def rss_mib(self, name: str) -> float:
        return sum(proc.memory_info().rss for proc in self.procs[name]) / 2**20

    def threads(self, name: str) -> int:
        return sum(proc.num_threads() for proc in self.procs[name])

    def ready_nodes(self) -> int:
        items, _ = self.client.list_all(NODES)
        return sum(
            any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or []
            )
            for n in items
        )

    def stop(self) -> None:
        for fleet in self.fleets:
            fleet.terminate()
        for fleet in self.fleets:
            fleet.wait(300)
        self.scheduler.terminate()
        self.scheduler.wait(60)
        self.client.close()


class LoadLog:
    """The machine's 1-minute load average, sampled every few seconds while a run lasts (others share it)."""

    def __init__(self, period: float = 5.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self._thread.start()

    def _run(self, period: float) -> None:
        while not self._stop.wait(period):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join()
        return self.samples or [os.getloadavg()[0]]


def run(
    nodes: int,
    per_node: int,
    rate: float,
    per_process: int,
    fleet_args: list[str],
    label: str = "",
    delete_rate: float | None = None,
) -> dict[str, float]:
    """One density run; its figures are printed as `N=<nodes>[ label]: ...`."""
    total = nodes * per_node
    tag = f"N={nodes}{label}"
    delete_rate = delete_rate or rate
    deletes = f", deleted at {delete_rate:g}/s" if delete_rate != rate else ""
    print(
        f"--- {nodes} hollow nodes, {total} pods at {rate:g}/s{deletes} ({' '.join(fleet_args)})", flush=True
    )
    figures: dict[str, float] = {}
    with (
        ApiServerProcess() as api,
        tempfile.TemporaryDirectory(prefix="kubenode-scale-", dir="/dev/shm") as tmp,
    ):
        started = time.perf_counter()
        load = LoadLog()
        cluster = Cluster(api, nodes, per_process, Path(tmp), fleet_args)
        try:
            wait_until(lambda: cluster.ready_nodes() >= nodes, 600, f"{nodes} Ready nodes")
            report(f"{tag}: all nodes Ready after", time.perf_counter() - started, "s")
            idle_cpu = cluster.cpu()
            time.sleep(IDLE_SECONDS)
            idle = {k: (v - idle_cpu[k]) / IDLE_SECONDS for k, v in cluster.cpu().items()}
            figures["hollow RSS per node, idle | MiB"] = cluster.rss_mib("hollow") / nodes
            figures["hollow CPU per node, idle | ms/s"] = idle["hollow"] * 1000 / nodes
            figures["hollow threads per node, idle | threads"] = cluster.threads("hollow") / nodes
            figures["apiserver CPU, heartbeats only | %"] = idle["apiserver"] * 100

            watch = PodLog(cluster.client)
            before, cpu_before, creates_began = scrape_apiserver(api), cluster.cpu(), time.perf_counter()
            names = [f"density-{i:06d}" for i in range(total)]
            sent = at_steady_rate(
                rate, names, lambda name: cluster.client.create(PODS, density_pod(name), NAMESPACE)
            )
            wait_until(lambda: len(watch.running) >= total, 600, f"{total} pods Running")
            cpu_after, pods_window = cluster.cpu(), time.perf_counter() - creates_began
            rss_peak = cluster.rss_mib("apiserver")
            threads_peak = cluster.threads("hollow")
            hollow_peak = cluster.rss_mib("hollow")
            time.sleep(STEADY_SECONDS)  # every pod running, none arriving: what a node with its pods costs
            steady = {k: (v - cpu_after[k]) / STEADY_SECONDS for k, v in cluster.cpu().items()}
            figures["hollow CPU per node, pods running | ms/s"] = steady["hollow"] * 1000 / nodes
            figures["apiserver CPU, pods running, none arriving | %"] = steady["apiserver"] * 100

            def delete(name: str) -> None:
                with contextlib.suppress(NotFound):
                    cluster.client.delete(PODS, name, NAMESPACE)

            at_steady_rate(delete_rate, names, delete)
            wait_until(lambda: len(watch.deleted) >= total, 600, f"{total} pods deleted by their nodes")
            after = scrape_apiserver(api)
            watch.close()
        finally:
            cluster.stop()
            loads = load.stop()
        problems = verify(watch, names, cluster.ledgers)

    startup = [watch.running[n] - sent[n] for n in names]
    for pct in (50, 90, 99):
        figures[f"pod startup p{pct} | s"] = percentile(startup, pct)
    binds = sorted(watch.bound[n] for n in names)
    figures["scheduler throughput | bindings/s"] = total / max(binds[-1] - binds[0], 1e-9)
    create_window = max(watch.running.values()) - min(sent.values())
    for name in ("apiserver", "scheduler", "hollow"):
        figures[f"{name} CPU per pod | ms"] = (cpu_after[name] - cpu_before[name]) * 1000 / total
    # What the heartbeats of the same window cost at the idle rate, taken out: at N = 1,000 they are about as
    # much as the pods themselves, and they grow with N at a fixed pod rate.
    for name in ("apiserver", "hollow"):
        heartbeats = idle[name] * pods_window
        figures[f"{name} CPU per pod, heartbeats taken out | ms"] = (
            (cpu_after[name] - cpu_before[name] - heartbeats) * 1000 / total
        )
    figures["apiserver CPU while pods start | %"] = (
        (cpu_after["apiserver"] - cpu_before["apiserver"]) / create_window * 100
    )
    figures["apiserver RSS, pods running | MiB"] = rss_peak
    figures["hollow RSS per node, pods running | MiB"] = hollow_peak / nodes
    figures["hollow threads, pods running | threads"] = threads_peak
    figures["load average during the run, median | load"] = percentile(loads, 50)
    figures["load average during the run, max | load"] = max(loads)
    for key, value in figures.items():
        name, unit = key.split(" | ")
        report(f"{tag}: {name}", value, unit, "<= 5 s" if name == "pod startup p99" else "")
    for key, (calls, p99) in sorted(api_latencies(before, after).items()):
        limit = "<= 30 s" if key.startswith("LIST") else "<= 1 s"
        report(f"{tag}: API p99 {key} ({calls:.0f} calls)", p99 * 1000, "ms", limit)
        figures[f"API p99 {key} | ms"] = p99 * 1000
    if problems:
        for problem in problems[:20]:
            print("PROBLEM:", problem)
        raise SystemExit(
            f"{tag}: {len(problems)} pods were not run exactly once or not deleted on their node"
        )
    print(
        f"{tag}: every pod Running exactly once on exactly one node; every deletion reached its node",
        flush=True,
    )
    return figures


def verify(watch: PodLog, names: list[str], ledgers: list[Path]) -> list[str]:
    lines = [line.split() for ledger in ledgers for line in ledger.read_text().splitlines()]
    starts = Counter((w[1], w[2]) for w in lines if w[0] == "start")
    stops = Counter((w[1], w[2]) for w in lines if w[0] == "stop")
    started_uids = Counter(w[2] for w in lines if w[0] == "start")
    problems = []
    for name in names:
        uid, nodes = watch.uids.get(name, ""), watch.nodes.get(name, set())
        if watch.running_count[name] != 1:
            problems.append(f"{name}: seen entering Running {watch.running_count[name]} times")
        if len(nodes) != 1:
            problems.append(f"{name}: bound to {sorted(nodes)}")
            continue
        node = next(iter(nodes))
        if started_uids[uid] != 1 or starts[(node, uid)] != 1:
            problems.append(f"{name}: started {started_uids[uid]} times, {starts[(node, uid)]} on {node}")
        if stops[(node, uid)] != 1:
            problems.append(f"{name}: stopped {stops[(node, uid)]} times on {node}")
        if name not in watch.deleted:
            problems.append(f"{name}: never deleted")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--rate", type=float, default=50.0, help="pod creates (and deletes) per second")
    parser.add_argument("--delete-rate", type=float, help="pod deletes per second (default: --rate)")
    parser.add_argument("--nodes-per-process", type=int, default=50, help="hollow nodes per fleet process")
    parser.add_argument(
        "--fleet-arg",
        action="append",
        default=[],
        help="an option for each `python -m agent.hollow` (repeat): --fleet-arg=--max-connections=32",
    )
    parser.add_argument(
        "--drivers",
        nargs="+",
        choices=("gevent", "threads"),
        default=["gevent"],
        help="the fleets' driver (agent/hollow/driver.py); with two, each N runs with each, in turn (an A/B)",
    )
    args = parser.parse_args()
    # A run stopped with SIGTERM (or SIGINT) unwinds: the fleets, the scheduler and the API server are stopped
    # and the work directory in /dev/shm (pod records and ledgers, ~170 MiB at N = 1,000) is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    fleet_args = [part for arg in args.fleet_arg for part in arg.split("=", 1)]
    several = len(args.drivers) > 1
    by_driver: dict[str, dict[int, dict[str, float]]] = {d: {} for d in args.drivers}
    for n in args.nodes:
        for driver in args.drivers:
            label = f" {driver}" if several else ""
            by_driver[driver][n] = run(
                n,
                args.pods_per_node,
                args.rate,
                args.nodes_per_process,
                [*fleet_args, "--driver", driver],
                label,
                args.delete_rate,
            )
    for driver, results in by_driver.items():
        smallest = min(results)
        for n, figures in sorted(results.items()):
            if n == smallest:
                continue
            which = f" {driver}" if several else ""
            print(f"--- growth from N={smallest} to N={n} ({n / smallest:g}x nodes){which}")
            for key, value in figures.items():
                base = results[smallest].get(key)
                if base:
                    report(f"x{n / smallest:g} nodes: {key.split(' | ')[0]}", value / base, "x")
    if several:
        print(f"--- {args.drivers[0]} over {args.drivers[1]}, same N, same machine, run in turn")
        first, second = (by_driver[d] for d in args.drivers[:2])
        for n in args.nodes:
            for key in (
                "hollow CPU per pod | ms",
                "hollow threads per node, idle | threads",
                "pod startup p99 | s",
            ):
                if second[n].get(key):
                    report(
                        f"N={n}: {key.split(' | ')[0]}, {args.drivers[0]}/{args.drivers[1]}",
                        first[n][key] / second[n][key],
                        "x",
                    )


if __name__ == "__main__":
    main()
