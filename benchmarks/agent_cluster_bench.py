"""The node agent joined to a real `kubenode apiserver` (needs root: real cgroups and processes).

Prints:
- a device turning unhealthy or healthy again (the static device plugin's health file) to the Node's
  allocatable in the API, p50 and max over 10 flips (goal <= 1 s; the plugin's noticing included);
- 110 pods bound through the API (created unbound, then a Binding each, as a scheduler does) to all
  Running in the API, as seen by a watch (goal <= 3 s);
- status-write latency p50/p99: from the moment each pod's process started (it writes its own clock
  to a file as it starts) to the watch delivering that pod's Running status;
- the RSS of that agent with the 110 pods running.
`--python PATH` (or KUBENODE_BENCH_PYTHON) runs the whole benchmark, the agent included, under that
interpreter (a venv's python, e.g. .venv312/bin/python for the Python 3.12 figure): the agent is started
with the benchmark's own interpreter, so the benchmark re-executes itself with the one asked for.
Everything it makes (API server data, agent state, cgroups, processes) is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchstats import percentile, report, rss_mib

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import NODES, PODS, KubeClient, load_kubeconfig
from kubenode.kubeclient.informer import Informer

PODS_COUNT = 110
SETTINGS = {"nodeStatusUpdateFrequency": 10.0, "nodeLeaseRenewInterval": 10.0, "housekeepingInterval": 2.0}


def pod(name: str, marks: Path) -> dict[str, Any]:
    # The shell records when the container's process started (wall clock, ns), then becomes the sleep.
    command = f"date +%s%N > {marks}/{name}; exec sleep 600"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": ["/bin/sh", "-c", command]}],
        },
    }


def bench_allocatable(admin: KubeClient, agent: AgentProcess, rounds: int = 10) -> list[float]:
    """Seconds from a device's health flipping (the static plugin's health file) to the Node's allocatable
    in the API showing it, seen by a watch; the plugin's own noticing is included."""
    allocatable: dict[str, float] = {}
    changed = threading.Condition()

    def seen(obj: dict[str, Any]) -> None:
        value = ((obj.get("status") or {}).get("allocatable") or {}).get("example.com/dongle")
        with changed:
            allocatable.setdefault(str(value), time.time())
            changed.notify_all()

    watch: Informer[dict[str, Any]] = Informer(
        admin,
        NODES,
        field_selector=f"metadata.name={agent.node}",
        on_add=seen,
        on_update=lambda o, n: seen(n),
    )
    watch.start()
    try:
        with changed:
            if not changed.wait_for(lambda: "2" in allocatable, 30):
                raise SystemExit("the static plugin's dongles never reached the Node")
        samples = []
        for i in range(rounds):
            want = "1" if i % 2 == 0 else "2"
            with changed:
                allocatable.clear()
            flipped = time.time()
            if want == "1":
                agent.set_unhealthy("dongle-0")
            else:
                agent.set_unhealthy()
            with changed:
                if not changed.wait_for(lambda w=want: w in allocatable, 10):  # type: ignore[misc]
                    raise SystemExit(f"allocatable never became {want}")
                samples.append(allocatable[want] - flipped)
        return samples
    finally:
        watch.stop()


PYTHON_ENV = "KUBENODE_BENCH_PYTHON"


def run_under(python: str) -> None:
    """Re-execute this benchmark under `python` unless it already runs there (execve does not return)."""
    found = shutil.which(python)
    if found is None:
        raise SystemExit(f"--python {python}: no such interpreter")
    target = os.path.abspath(found)
    if target == os.path.abspath(sys.executable):
        return
    os.execve(target, [target, os.path.abspath(__file__)], {**os.environ, PYTHON_ENV: target})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python",
        default=os.environ.get(PYTHON_ENV, ""),
        help=f"the interpreter to run the benchmark and its agent with (default: this one; env {PYTHON_ENV})",
    )
    args = parser.parse_args()
    if args.python:
        run_under(args.python)
    print(f"python {sys.version.split()[0]} ({sys.executable})", flush=True)
    if os.geteuid() != 0:
        print("agent_cluster_bench needs root (real cgroups)", file=sys.stderr)
        return 1
    marks = Path(tempfile.mkdtemp(prefix="kn-cluster-bench-"))
    with ApiServerProcess() as api:
        admin = KubeClient(load_kubeconfig(api.kubeconfig), pool_size=16)
        agent = AgentProcess(api.kubeconfig, settings=SETTINGS, plugin=True)
        agent.kubeconfig = api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
        running_at: dict[str, float] = {}
        all_running = threading.Event()

        def seen(obj: dict[str, Any]) -> None:
            name = obj["metadata"]["name"]
            if (obj.get("status") or {}).get("phase") == "Running" and name not in running_at:
                running_at[name] = time.time()
                if len(running_at) == PODS_COUNT:
                    all_running.set()

        watch: Informer[dict[str, Any]] = Informer(
            admin, PODS, namespace="default", on_add=seen, on_update=lambda old, new: seen(new)
        )
        try:
            agent.start()
            changes = bench_allocatable(admin, agent)
            report("device health change -> Node allocatable p50", percentile(changes, 50) * 1000, "ms")
            report("device health change -> Node allocatable max", max(changes) * 1000, "ms", "<= 1000 ms")
            names = [f"bench-{i:03d}" for i in range(PODS_COUNT)]
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda n: admin.create(PODS, pod(n, marks), "default"), names))
            watch.start()
            watch.wait_for_sync(10)
            binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": agent.node}}

            def bind(name: str) -> None:
                admin.create(
                    PODS, {**binding, "metadata": {"name": name}}, "default", name=name, subresource="binding"
                )

            started = time.time()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(bind, names))
            bound = time.time()
            if not all_running.wait(60):
                raise SystemExit(f"only {len(running_at)} of {PODS_COUNT} pods Running within 60 s")
            report(
                "110 pods bound via the API -> all Running in it",
                max(running_at.values()) - started,
                "s",
                "<= 3 s",
            )
            report("  of which binding them took", bound - started, "s")
            # Running is reported once the process is spawned; its shell may write the mark a moment later.
            deadline = time.monotonic() + 10
            while not all((marks / n).exists() and (marks / n).read_text().strip() for n in names):
                if time.monotonic() > deadline:
                    raise SystemExit("some pods never wrote their start mark")
                time.sleep(0.05)
            process_started = {n: int((marks / n).read_text()) / 1e9 for n in names}
            latencies = [running_at[n] - process_started[n] for n in names]
            report("  of which until the last process started", max(process_started.values()) - started, "s")
            report("status write p50 (process start -> API Running)", percentile(latencies, 50) * 1000, "ms")
            report("status write p99 (process start -> API Running)", percentile(latencies, 99) * 1000, "ms")
            assert agent.process is not None
            report(
                "agent RSS with 110 pods, joined to a cluster", rss_mib(agent.process.pid), "MiB", "<= 64 MiB"
            )
        finally:
            watch.stop()
            leftovers = agent.close()
            admin.close()
            shutil.rmtree(marks, ignore_errors=True)
            if leftovers:
                print(f"cgroups left behind: {leftovers}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
