"""End-to-end scheduling throughput through a real `kubenode apiserver`: kube's scheduler_perf shapes.

- SchedulingBasic: 5,000 nodes, 1,000 pods already bound, then 10,000 measured pods.
- SchedulingWithExtendedResource: 5,000 nodes advertising example.com/foo, 5,000 pods asking for it.

Nodes are API objects only (scheduler_perf's node-default: 4 cpu, 32Gi, 110 pods); pods ask for
100m cpu and 500Mi (pod-default). The API server and `kubenode scheduler run` are separate
processes on this machine; the benchmark creates objects concurrently through the shared client
layer and watches pods to see each binding. For each shape it prints:
- pods/s from the first measured pod's creation to the last one's binding, as the watch saw it;
- p50/p99 of scheduler_pod_scheduling_sli_duration_seconds (from the scheduler's /metrics,
  interpolated within histogram buckets as Prometheus' histogram_quantile does);
- CPU seconds each process spent during the measured window (where the time goes), and the
  same per measured pod (the figure to compare across changes on a busy machine).
`--profile-scheduler` runs the scheduler under cProfile and prints its top functions.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from benchstats import report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.apiserver import ApiServerProcess  # noqa: E402
from kubenode.kubeclient import EVENTS, NODES, PODS, KubeClient, load_kubeconfig  # noqa: E402
from kubenode.kubeclient.informer import Informer  # noqa: E402

EXTENDED = "example.com/foo"
CREATORS = 64  # concurrent creates: the API server's group commit batches them


def node_object(i: int, extended: bool) -> dict[str, Any]:
    allocatable = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    if extended:
        allocatable[EXTENDED] = "5"
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def pod_object(name: str, extended: bool, node: str = "") -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "500Mi"}
    if extended:
        requests[EXTENDED] = "1"
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": requests, "limits": requests},
            }
        ]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def create_concurrently(client: KubeClient, objects: list[dict[str, Any]]) -> float:
    """Create everything with CREATORS threads; returns seconds taken."""

    def create(obj: dict[str, Any]) -> None:
        if obj["kind"] == "Node":
            client.create(NODES, obj)
        else:
            client.create(PODS, obj, "default")

    start = time.perf_counter()
    with ThreadPoolExecutor(CREATORS) as pool:
        for _ in pool.map(create, objects):
            pass
    return time.perf_counter() - start


class BindWatch:
    """Records when each measured pod (name prefix) was first seen bound, through the shared client layer's
    informer on pods. The API server closes a watcher that lags (this process is busy creating pods
    meanwhile): the informer then watches again from its last resourceVersion, or relists after 410."""

    def __init__(self, client: KubeClient, prefix: str, expected: int) -> None:
        self.prefix, self.expected = prefix, expected
        self.bound: dict[str, float] = {}
        self.done = threading.Event()
        self._informer: Informer[tuple[str, str]] = Informer(
            client,
            PODS,
            decode=lambda obj: (
                (obj.get("metadata") or {}).get("name", ""),
                (obj.get("spec") or {}).get("nodeName") or "",
            ),
            on_add=self._seen,
            on_update=lambda _old, pod: self._seen(pod),
            watch_timeout_s=3600,
            name="bench-binds",
        )
        self._informer.start()
        if not self._informer.wait_for_sync(120):
            raise SystemExit("the benchmark's pod watch did not sync in 120 s")

    @property
    def rewatches(self) -> int:
        """Watches after the first one: the server closed a lagging watch, or a relist after 410."""
        return self._informer.watches - 1

    def _seen(self, pod: tuple[str, str]) -> None:
        name, node = pod
        if name.startswith(self.prefix) and node and name not in self.bound:
            self.bound[name] = time.time()
            if len(self.bound) >= self.expected:
                self.done.set()

    def close(self) -> None:
        self._informer.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> str:
    return str(urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode())


def histogram_quantiles(text: str, name: str, quantiles: tuple[float, ...]) -> list[float]:
    """histogram_quantile over every label set of one histogram, summed."""
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            labels, count_text = line.rsplit(" ", 1)
            le = labels.split('le="', 1)[1].split('"', 1)[0]
            bound = float("inf") if le == "+Inf" else float(le)
            buckets[bound] = buckets.get(bound, 0.0) + float(count_text)
    ordered = sorted(buckets.items())
    total = ordered[-1][1] if ordered else 0.0
    results = []
    for q in quantiles:
        rank, lower, below = q * total, 0.0, 0.0
        value = float("nan")
        for bound, count in ordered:
            if count >= rank:
                if bound == float("inf"):
                    value = lower
                else:
                    span = count - below
                    value = lower + (bound - lower) * ((rank - below) / span if span else 1.0)
                break
            lower, below = bound, count
        results.append(value)
    return results


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def wait_for_events(client: KubeClient, expected: int, deadline_s: float) -> float:
    """Wait until `expected` Scheduled events exist; the seconds that took."""
    start = time.time()
    while len(client.list_all(EVENTS, field_selector="reason=Scheduled")[0]) < expected:
        if time.time() - start > deadline_s:
            raise SystemExit(f"fewer than {expected} Scheduled events after {deadline_s:.0f} s")
        time.sleep(0.5)
    return time.time() - start


def ready(port: int) -> bool:
    try:
        return bool(urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200)
    except OSError:
        return False


def run_shape(
    title: str,
    nodes: int,
    bound: int,
    measured: int,
    extended: bool,
    goal: str,
    profile: bool,
    scheduler_args: list[str],
) -> None:
    print(f"--- {title}: {nodes} nodes, {bound} pods already bound, {measured} measured pods", flush=True)
    with ApiServerProcess() as api:
        client = KubeClient(load_kubeconfig(api.kubeconfig), pool_size=CREATORS + 8, timeout=120)
        seconds = create_concurrently(client, [node_object(i, extended) for i in range(nodes)])
        report(f"{title}: node creates/s", nodes / seconds, "objects/s")
        if bound:
            existing = [pod_object(f"bound-{i:05d}", extended, f"node-{i % nodes:05d}") for i in range(bound)]
            create_concurrently(client, existing)
        port = free_port()
        prof = Path(tempfile.mkstemp(suffix=".prof")[1]) if profile else None
        runner = [__file__, "--profiled-scheduler", str(prof), "--"] if prof else ["-m", "cli.main"]
        command = [sys.executable, *runner, "--log-level", "WARNING", "scheduler", "run"]
        command += ["--kubeconfig", str(api.kubeconfig), "--metrics-bind-address", f"127.0.0.1:{port}"]
        command += scheduler_args
        scheduler = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            wait_until(lambda: ready(port), 120, "the scheduler's informers to sync")
            watch = BindWatch(client, "m-", measured)
            processes = {
                "API server": psutil.Process(api.process.pid),  # type: ignore[union-attr]
                "scheduler": psutil.Process(scheduler.pid),
                "benchmark (creates + watch)": psutil.Process(),
            }
            before = {name: p.cpu_times()[:2] for name, p in processes.items()}
            pods = [pod_object(f"m-{i:05d}", extended) for i in range(measured)]
            start = time.time()
            create_seconds = create_concurrently(client, pods)
            if not watch.done.wait(600):
                raise SystemExit(f"only {len(watch.bound)} of {measured} pods bound after 10 minutes")
            end = max(watch.bound.values())
            # The Scheduled events trail the bindings (the recorder writes them in the background):
            # CPU is counted until they are all written, so it includes every event's cost.
            lag = wait_for_events(client, measured, deadline_s=300)
            after = {name: p.cpu_times()[:2] for name, p in processes.items()}
            watch.close()
            if watch.rewatches:
                print(
                    f"(the API server closed the watch {watch.rewatches} times; the informer watched again)"
                )
            elapsed = end - start
            report(f"{title}: measured pod creates/s", measured / create_seconds, "pods/s")
            report(f"{title}: scheduling throughput", measured / elapsed, "pods/s", goal)
            report(f"{title}: Scheduled events written after the last binding", lag, "s")
            text = scrape(port)
            p50, p99 = histogram_quantiles(text, "scheduler_pod_scheduling_sli_duration_seconds", (0.5, 0.99))
            report(f"{title}: SLI duration p50", p50 * 1000, "ms")
            report(f"{title}: SLI duration p99", p99 * 1000, "ms")
            # The attempt (pop -> bound) against the SLI (queued -> bound): the rest is queue wait.
            a50, a99 = histogram_quantiles(text, "scheduler_scheduling_attempt_duration_seconds", (0.5, 0.99))
            report(f"{title}: attempt duration p50", a50 * 1000, "ms")
            report(f"{title}: attempt duration p99", a99 * 1000, "ms")
            for name in processes:
                user, system = (a - b for a, b in zip(after[name], before[name], strict=True))
                report(
                    f"{title}: CPU of {name}", user + system, f"s in {elapsed:.1f}s ({system:.1f}s system)"
                )
            # CPU per measured pod: what a change to either process costs or saves, unlike
            # pods/s, which moves with whatever else this shared machine is running.
            for name in processes:
                seconds = sum(after[name]) - sum(before[name])
                report(f"{title}: CPU per pod of {name}", seconds / measured * 1000, "ms/pod")
        finally:
            scheduler.terminate()
            scheduler.wait(60)
            client.close()
        if prof is not None:
            import pstats

            print_breakdown(pstats.Stats(str(prof)), measured)
            print(f"--- scheduler profile ({prof}), top 30 by own time")
            pstats.Stats(str(prof)).sort_stats("tottime").print_stats(30)
            print(f"(kept: {prof})")


# Where the scheduler's CPU goes: cumulative time of the entry points of each part. They do not
# overlap (a bind's HTTP request is under "client", the JSON it decodes under "JSON").
BREAKDOWN = (
    ("engine (filter, score, assume, queue)", "scheduler/engine.py", "schedule_one", True),
    ("decoding watch events into the model", "kubenode/model/parse.py", "parse_pod", True),
    ("decoding nodes", "kubenode/model/parse.py", "parse_node", True),
    ("HTTP client (kubeclient transport + TLS)", "kubenode/kubeclient/transport.py", "request", True),
    ("watch stream reads", "kubenode/kubeclient/client.py", "__iter__", False),
    ("JSON (orjson loads + dumps)", "~", "<orjson.", False),
)


def print_breakdown(stats: Any, pods: int) -> None:
    """Sum each part's time (cumulative for entry points, own time for leaf functions)."""
    table: dict[Any, Any] = stats.stats  # (file, line, function) -> (cc, nc, tt, ct, callers)
    total = sum(tt for _, _, tt, _, _ in table.values())
    print(f"--- scheduler CPU by part (profiled: cProfile inflates Python-heavy parts), {total:.1f}s in all")
    for label, path, function, cumulative in BREAKDOWN:
        seconds = sum(
            (ct if cumulative else tt)
            for (file, _, name), (_, _, tt, ct, _) in table.items()
            if file.endswith(path) and name.startswith(function)
        )
        print(f"  {label:<48} {seconds:7.2f}s  {seconds / pods * 1e6:8.0f} us/pod  {seconds / total:6.1%}")


def profiled_scheduler(out: str, argv: list[str]) -> int:
    """Run `kubenode` with cProfile on EVERY thread (harness/profiled.py); the merged profile is
    written to `out` when the scheduler exits (SIGTERM)."""
    from harness.profiled import profiled

    return profiled(out, argv)


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--profiled-scheduler":
        raise SystemExit(profiled_scheduler(sys.argv[2], sys.argv[4:]))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=("basic", "extended", "all"), default="all")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=0, help="measured pods (default: the shape's)")
    parser.add_argument("--profile-scheduler", action="store_true", help="cProfile the scheduler process")
    parser.add_argument("--binding-workers", type=int, help="passed to the scheduler")
    args = parser.parse_args()
    extra = ["--binding-workers", str(args.binding_workers)] if args.binding_workers else []
    if args.shape in ("basic", "all"):
        run_shape(
            "SchedulingBasic",
            args.nodes,
            1000,
            args.pods or 10000,
            False,
            ">= 700",
            args.profile_scheduler,
            extra,
        )
    if args.shape in ("extended", "all"):
        run_shape(
            "SchedulingWithExtendedResource",
            args.nodes,
            0,
            args.pods or 5000,
            True,
            ">= 400",
            args.profile_scheduler,
            extra,
        )


if __name__ == "__main__":
    main()
