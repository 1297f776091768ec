"""`kubectl top` latency: the real kubectl against `kubenode apiserver` with one joined agent running 20 pods.

Prints, all with the real kubectl on this machine:
- `kubectl get nodes` p50 (the floor: kubectl's own start, discovery from its cache, one request),
- `kubectl top node` the first time (metrics.k8s.io scrapes the agent twice, FIRST_WINDOW_S apart, for a
  CPU rate) and p50 after that (one scrape, or the result of one younger than FRESH_S),
- `kubectl top pod -A` p50,
- the ratio of `kubectl top node` p50 to the floor.
The agent listens on the host's address (the Node's InternalIP), as under `kubenode up`; every pod, cgroup
and process is removed at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchstats import percentile, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # harness/ lives at the repository root

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.hostnet import host_ip
from kubenode.kubeclient import PODS, KubeClient, load_kubeconfig

KUBECTL = Path(__file__).resolve().parents[1] / ".venv/bin/kubectl"
RUNS = 10
PODS_ON_NODE = 20


def timed(kubeconfig: Path, *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed


def main() -> int:
    if os.geteuid() != 0 or not KUBECTL.exists():
        print("top_bench needs root (real cgroups) and .venv/bin/kubectl (the dev extras)", file=sys.stderr)
        return 1
    with ApiServerProcess() as api:
        agent = AgentProcess(api.kubeconfig, settings={"listen": f"{host_ip()}:0"})
        agent.kubeconfig = api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
        admin = KubeClient(load_kubeconfig(api.kubeconfig))
        try:
            agent.start()
            for i in range(PODS_ON_NODE):
                container = {"name": "main", "image": "busybox", "command": ["sleep", "600"]}
                spec = {"nodeName": agent.node, "containers": [container]}
                admin.create(
                    PODS,
                    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"t{i}"}, "spec": spec},
                    "default",
                )
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                items = admin.list(PODS, "default").get("items") or []
                if sum((p.get("status") or {}).get("phase") == "Running" for p in items) == PODS_ON_NODE:
                    break
                time.sleep(0.2)
            else:
                raise SystemExit("the pods did not run within 120 s")
            config = api.kubeconfig
            timed(config, "get", "nodes")  # kubectl's discovery cache filled
            floor = [timed(config, "get", "nodes") for _ in range(RUNS)]
            first = timed(config, "top", "node")
            nodes, pods = [], []
            for _ in range(RUNS):
                time.sleep(1.1)  # past FRESH_S: every call scrapes
                nodes.append(timed(config, "top", "node"))
                pods.append(timed(config, "top", "pod", "-A"))
            report("kubectl get nodes p50 (floor)", percentile(floor, 50) * 1000, "ms")
            report("kubectl top node, first (two scrapes)", first * 1000, "ms")
            report("kubectl top node p50", percentile(nodes, 50) * 1000, "ms")
            report(f"kubectl top pod -A p50 ({PODS_ON_NODE} pods)", percentile(pods, 50) * 1000, "ms")
            report("top node p50 / floor", percentile(nodes, 50) / percentile(floor, 50), "x")
            report("load average (1 min) at the end", os.getloadavg()[0], "")
        finally:
            admin.close()
            agent.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
