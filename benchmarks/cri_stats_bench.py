"""/stats/summary with CRI pods against process pods, in one run (root, containerd: `make containerd-deps`).

A real `kubenode apiserver`, a real containerd with a private config and one agent with
`containerRuntimeEndpoint` and a status port. 30 process pods (the `kubenode-process` RuntimeClass) are made
Running and /stats/summary is scraped 20 times (the floor: the pod cgroups only); then 30 CRI pods beside them
and 20 scrapes more (one node-wide ListPodSandboxStats a scrape). Prints each scrape's p50 and p99, the
ratio, and the cost per CRI pod. Measured here: 16 ms a CRI pod with one ListPodSandboxStats a pod, 2.7 ms
with one a scrape (this loaded 2-core machine). Everything it makes is removed at the end.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

from benchstats import percentile, report
from cri_bench import PODS_PER_KIND, create_and_time, node_agent, start_with_process_class

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.agent import AgentProcess, close_reporting_leaks
from harness.apiserver import ApiServerProcess
from harness.containerd import ContainerdProcess
from kubenode.hostnet import host_ip
from kubenode.kubeclient import KubeClient, load_kubeconfig

SCRAPES = 20


def scrape_times(agent: AgentProcess, pods: int) -> list[float]:
    """Seconds per /stats/summary, each checked to hold `pods` pods with their containers."""
    times = []
    for _ in range(SCRAPES):
        started = time.perf_counter()
        with urllib.request.urlopen(f"http://{agent.status_address}/stats/summary", timeout=30) as answer:
            summary = json.loads(answer.read())
        times.append(time.perf_counter() - started)
        with_containers = [p for p in summary["pods"] if p["containers"]]
        if len(with_containers) != pods:
            raise SystemExit(f"the summary holds {len(with_containers)} pods with containers, not {pods}")
    return times


def main() -> int:
    with ContainerdProcess() as containerd, ApiServerProcess() as api:
        admin = KubeClient(load_kubeconfig(api.kubeconfig))
        agent = node_agent(api, containerd, listen=f"{host_ip()}:0")
        try:
            start_with_process_class(admin, agent)
            create_and_time(admin, agent.node, "proc", process=True)
            floor = scrape_times(agent, PODS_PER_KIND)
            create_and_time(admin, agent.node, "cri", process=False)
            both = scrape_times(agent, 2 * PODS_PER_KIND)
            for label, samples in ((f"{PODS_PER_KIND} process pods", floor), ("and as many CRI pods", both)):
                report(f"/stats/summary p50, {label}", percentile(samples, 50) * 1000, "ms")
                report(f"/stats/summary p99, {label}", percentile(samples, 99) * 1000, "ms")
            ratio = percentile(both, 50) / percentile(floor, 50)
            report("with CRI pods / process pods only, p50", ratio, "x")
            extra = (percentile(both, 50) - percentile(floor, 50)) / PODS_PER_KIND
            report("p50 cost per CRI pod", extra * 1000, "ms")
        finally:
            status = close_reporting_leaks(agent, admin)
    return status


if __name__ == "__main__":
    sys.exit(main())
