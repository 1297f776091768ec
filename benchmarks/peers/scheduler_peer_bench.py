"""kubenode's scheduler against the real kube-scheduler v1.37.2, in turns, on the same API server: first the
real kube-apiserver with etcd (harness/k8s/controlplane.py), then `kubenode apiserver`.

Workload: scheduler_perf's SchedulingBasic shape as issue 56 sizes it, 5,000 pods onto 1,000 nodes (node
objects only: scheduler_perf's node-default, 4 cpu, 32Gi, 110 pods; pods its pod-default, 100m and 500Mi).
Each turn gets a fresh API server holding exactly the same objects, created before the scheduler starts, so
that the scheduler's run is all that is measured:

1. start the API server; create the nodes and the `default` ServiceAccount, then the pods (64 creators);
2. start the scheduler under test with the same client settings for both (QPS and burst 5,000:
   kube-scheduler's default 50/100 would cap it at ~50 binds/s; kubenode's scheduler has no client-side
   limit), no leader election, kube-scheduler's default parallelism (16) and kubenode's defaults;
3. a watch (the benchmark's own informer) records when each pod is first seen bound; the figures are
   pods/s from the first binding to the last, the scheduler's CPU-seconds per pod over that window, and the
   API server's (with etcd's, for kube-apiserver) CPU-seconds per pod over the same window.

Prints each turn's figures and the issue's ratios as `peer-ratio <pair and figure>: <value>x (goal ...)`.
`--pods`/`--nodes` shrink the run (the ratios are judged at the defaults).

Usage: python benchmarks/peers/scheduler_peer_bench.py [--pods 5000] [--nodes 1000] [--only kube-apiserver]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from scheduler_e2e_bench import BindWatch, create_concurrently, node_object, pod_object  # noqa: E402

from harness.apiserver import ApiServerProcess  # noqa: E402
from harness.k8s.binaries import binary  # noqa: E402
from harness.k8s.controlplane import ControlPlane  # noqa: E402
from harness.k8s.process import ManagedProcess, free_port  # noqa: E402
from kubenode.kubeclient import KubeClient, load_kubeconfig  # noqa: E402
from kubenode.kubeclient.errors import Conflict  # noqa: E402

QPS = 5000
SERVICE_ACCOUNTS = "/api/v1/namespaces/default/serviceaccounts"


@dataclass
class Turn:
    server: str
    scheduler: str
    pods: int
    seconds: float  # first binding to last
    scheduler_cpu: float
    server_cpu: float

    @property
    def pods_per_second(self) -> float:
        return (self.pods - 1) / self.seconds if self.seconds > 0 else float("inf")

    def line(self) -> str:
        return (
            f"{self.scheduler} on {self.server}: {self.pods} pods in {self.seconds:.2f} s = "
            f"{self.pods_per_second:.0f} pods/s; scheduler {1000 * self.scheduler_cpu / self.pods:.2f} ms"
            f" CPU/pod, API server {1000 * self.server_cpu / self.pods:.2f} ms CPU/pod"
        )


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
    return total


@contextlib.contextmanager
def kube_apiserver() -> Iterator[tuple[Path, Callable[[], list[int]]]]:
    # TaintNodesByCondition would put node.kubernetes.io/not-ready on every node object (no kubelet here makes
    # them Ready, and no node lifecycle controller runs): off, so that the nodes are schedulable, as in
    # scheduler_perf's test server.
    no_taints = ["--disable-admission-plugins=TaintNodesByCondition"]
    with ControlPlane(
        scheduler=False, controller_manager=False, extra_apiserver_args=no_taints, verbose=False
    ) as cp:

        def pids() -> list[int]:
            return [p for name in ("kube-apiserver", "etcd") if (p := cp.processes[name].pid) is not None]

        yield cp.admin_kubeconfig, pids


@contextlib.contextmanager
def kubenode_apiserver() -> Iterator[tuple[Path, Callable[[], list[int]]]]:
    with ApiServerProcess() as api:
        yield api.kubeconfig, lambda: [api.process.pid] if api.process is not None else []


def kube_scheduler(kubeconfig: Path, workdir: Path) -> ManagedProcess:
    config = workdir / "kube-scheduler.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(kubeconfig), "qps": QPS, "burst": QPS},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    argv = [
        str(binary("kube-scheduler")),
        "--config", str(config),
        "--authentication-kubeconfig", str(kubeconfig),
        "--authorization-kubeconfig", str(kubeconfig),
        "--bind-address", "127.0.0.1",
        "--secure-port", str(free_port()),
    ]  # fmt: skip
    return ManagedProcess("kube-scheduler", argv, workdir)


def kubenode_scheduler(kubeconfig: Path, workdir: Path) -> ManagedProcess:
    argv = [
        str(ROOT / ".venv/bin/kubenode"),
        "scheduler", "run",
        "--kubeconfig", str(kubeconfig),
        "--metrics-bind-address", f"127.0.0.1:{free_port()}",
    ]  # fmt: skip
    return ManagedProcess("kubenode-scheduler", argv, workdir)


def one_turn(server: str, scheduler: str, nodes: int, pods: int) -> Turn:
    start_server = kube_apiserver if server == "kube-apiserver" else kubenode_apiserver
    with (
        tempfile.TemporaryDirectory(prefix="kn-schedpeer-") as tmp,
        start_server() as (kubeconfig, server_pids),
    ):
        workdir = Path(tmp)
        client = KubeClient(load_kubeconfig(str(kubeconfig)))
        with contextlib.suppress(Conflict):  # kubenode apiserver makes it itself; kube's needs its controller
            client.request("POST", SERVICE_ACCOUNTS, body={"metadata": {"name": "default"}})
        create_concurrently(client, [node_object(i, extended=False) for i in range(nodes)])
        create_concurrently(client, [pod_object(f"pod-{i:05d}", extended=False) for i in range(pods)])
        watch = BindWatch(client, "pod-", pods)
        make = kube_scheduler if scheduler == "kube-scheduler" else kubenode_scheduler
        process = make(kubeconfig, workdir)
        process.start()
        try:
            server_before = cpu_seconds(server_pids())
            if not watch.done.wait(max(120.0, pods / 10)):
                raise SystemExit(
                    f"{scheduler} on {server}: {len(watch.bound)} of {pods} pods bound; "
                    f"its log:\n{process.log_tail(40)}"
                )
            assert process.pid is not None
            scheduler_cpu = cpu_seconds([process.pid])
            server_cpu = cpu_seconds(server_pids()) - server_before
        finally:
            watch.close()
            process.stop()
        times = sorted(watch.bound.values())
        return Turn(server, scheduler, pods, times[-1] - times[0], scheduler_cpu, server_cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--only", choices=["kube-apiserver", "kubenode-apiserver"])
    args = parser.parse_args(argv)
    servers = [args.only] if args.only else ["kube-apiserver", "kubenode-apiserver"]
    load = psutil.getloadavg()[0]
    print(
        f"scheduler peers: {args.pods} pods onto {args.nodes} nodes, load {load:.1f} at the start", flush=True
    )
    for server in servers:
        turns = {}
        for scheduler in ("kube-scheduler", "kubenode-scheduler"):
            turns[scheduler] = turn = one_turn(server, scheduler, args.nodes, args.pods)
            print(turn.line(), flush=True)
        kube, ours = turns["kube-scheduler"], turns["kubenode-scheduler"]
        pair = f"scheduler vs kube-scheduler on {server}, SchedulingBasic {args.pods} pods/{args.nodes} nodes"
        print(f"peer-ratio {pair}, pods/s: {ours.pods_per_second / kube.pods_per_second:.2f}x (goal >= 1.0x)")
        cpu_ratio = ours.scheduler_cpu / kube.scheduler_cpu if kube.scheduler_cpu else float("inf")
        print(f"peer-ratio {pair}, scheduler CPU per pod: {cpu_ratio:.2f}x (goal <= 2.0x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
