"""A Deployment of 1,000 replicas on 100 hollow nodes: from `kubectl create` to 1,000 available.

The API server, the scheduler and the hollow fleet of cluster_scale_bench (real agent code, pretend
processes; agent/hollow/), plus `kubenode controller-manager`. Once every Node is Ready and the
controllers have started, the real kubectl creates the Deployment; the clock stops when its status
says `availableReplicas: 1000` (the ReplicaSet controller counts Ready pods the agents reported).
CPU is read from /proc for each process over that window: the controller manager's CPU per pod
created, the scheduler's CPU per pod scheduled, and their ratio (both made 1,000 pods' worth of work).

    .venv/bin/python benchmarks/deployment_bench.py [--nodes 100] [--replicas 1000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from cluster_scale_bench import Cluster, cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controllers.resources import DEPLOYMENTS  # noqa: E402
from harness.apiserver import ApiServerProcess  # noqa: E402
from harness.controllermanager import ControllerManagerProcess  # noqa: E402
from kubenode.kubeclient import PODS  # noqa: E402

KUBECTL = Path(sys.executable).parent / "kubectl"


def wait_until(predicate: object, timeout: float, what: str, interval: float = 0.25) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():  # type: ignore[operator]
            return time.monotonic() - start
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def run(nodes: int, replicas: int, per_process: int) -> dict[str, float]:
    with ApiServerProcess() as api, tempfile.TemporaryDirectory(prefix="kn-deploy-bench-") as tmp:
        cluster = Cluster(api, nodes, per_process, Path(tmp), [])
        try:
            wait_until(lambda: cluster.ready_nodes() == nodes, 600, f"{nodes} Ready nodes", 1.0)
            manager = ControllerManagerProcess(
                api.data_dir / "controller-manager.kubeconfig", "--leader-elect=false"
            )
            try:
                wait_until(lambda: "workload controllers started" in manager.output(), 120, "the controllers")
                cm = psutil.Process(manager.process.pid)
                scheduler = cluster.procs["scheduler"][0]
                before = {"cm": cpu_seconds(cm), "scheduler": cpu_seconds(scheduler), **cluster.cpu()}
                start = time.monotonic()
                subprocess.run(
                    [str(KUBECTL), "--kubeconfig", str(api.kubeconfig), "create", "deployment", "big",
                     "--image=busybox", f"--replicas={replicas}", "--", "sleep", "3600"],
                    check=True, capture_output=True,
                )  # fmt: skip

                def available() -> bool:
                    status = cluster.client.get(DEPLOYMENTS, "big", "default").get("status") or {}
                    return int(status.get("availableReplicas") or 0) >= replicas

                wait_until(available, 1800, f"{replicas} available replicas", 0.5)
                elapsed = time.monotonic() - start
                after = {"cm": cpu_seconds(cm), "scheduler": cpu_seconds(scheduler), **cluster.cpu()}
                pods, _ = cluster.client.list_all(PODS, "default", label_selector="app=big")
                if len(pods) != replicas:
                    raise SystemExit(f"{len(pods)} pods for {replicas} replicas")
            finally:
                manager.close()
        finally:
            cluster.stop()
    cm_per_pod = (after["cm"] - before["cm"]) / replicas
    scheduler_per_pod = (after["scheduler"] - before["scheduler"]) / replicas
    return {
        "create to available | s": elapsed,
        "pods available per second | pods/s": replicas / elapsed,
        "controller-manager CPU per pod | ms": cm_per_pod * 1000,
        "scheduler CPU per pod | ms": scheduler_per_pod * 1000,
        "controller-manager / scheduler CPU per pod | ratio": cm_per_pod / scheduler_per_pod,
        "apiserver CPU per pod | ms": (after["apiserver"] - before["apiserver"]) * 1000 / replicas,
        "hollow fleet CPU per pod | ms": (after["hollow"] - before["hollow"]) * 1000 / replicas,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=1000)
    parser.add_argument("--nodes-per-process", type=int, default=50)
    args = parser.parse_args()
    print(f"--- {args.replicas} replicas on {args.nodes} hollow nodes", flush=True)
    for name, value in run(args.nodes, args.replicas, args.nodes_per_process).items():
        print(f"{name:55s} {value:10.2f}", flush=True)


if __name__ == "__main__":
    main()
