"""CRI pods against process pods on one agent, in one run (needs root, containerd: `make containerd-deps`).

A real `kubenode apiserver`, a real containerd with a private config (harness/containerd.py) and one agent
with `containerRuntimeEndpoint`. 30 pods with an image (CRI: sandbox, create, start) and 30 pods with the
`kubenode-process` RuntimeClass (host processes) are created, one kind after the other, on the node.
Prints pod create -> Running in the API (seen by a watch) p50 and p99 for each kind, and their ratio.
Everything it makes is removed at the end.
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchstats import percentile, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.agent import AgentProcess, close_reporting_leaks
from harness.apiserver import ApiServerProcess
from harness.containerd import ContainerdProcess
from harness.ociimage import BUSYBOX_IMAGE
from kubenode.kubeclient import PODS, KubeClient, load_kubeconfig
from kubenode.kubeclient.client import Resource
from kubenode.kubeclient.informer import Informer

PODS_PER_KIND = 30
RUNTIMECLASSES = Resource("runtimeclasses", "RuntimeClass", group="node.k8s.io", namespaced=False)
SETTINGS = {"nodeStatusUpdateFrequency": 10.0, "nodeLeaseRenewInterval": 10.0, "housekeepingInterval": 2.0}


def pod(name: str, node: str, process: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node,
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/sh", "-c", "exec sleep 600"],
            }
        ],
    }
    if process:
        spec["runtimeClassName"] = "host-processes"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def create_and_time(admin: KubeClient, node: str, prefix: str, process: bool) -> list[float]:
    """Seconds from each pod's create call to the watch delivering it Running."""
    created: dict[str, float] = {}
    running: dict[str, float] = {}
    done = threading.Condition()

    def seen(obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if name.startswith(prefix) and (obj.get("status") or {}).get("phase") == "Running":
            with done:
                running.setdefault(name, time.monotonic())
                done.notify_all()

    watch: Informer[dict[str, Any]] = Informer(
        admin, PODS, namespace="default", on_add=seen, on_update=lambda o, n: seen(n)
    )
    watch.start()
    try:
        names = [f"{prefix}-{i}" for i in range(PODS_PER_KIND)]

        def create(name: str) -> None:
            created[name] = time.monotonic()
            admin.create(PODS, pod(name, node, process), "default")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, names))
        with done:
            if not done.wait_for(lambda: len(running) == len(names), 180):
                raise SystemExit(f"{prefix}: only {len(running)} of {len(names)} pods Running within 180 s")
        return [running[n] - created[n] for n in names]
    finally:
        watch.stop()


def node_agent(api: ApiServerProcess, containerd: ContainerdProcess, **settings: Any) -> AgentProcess:
    """An agent (not started yet) on the containerd, joined as its node."""
    agent = AgentProcess(
        api.kubeconfig, settings={**SETTINGS, "containerRuntimeEndpoint": containerd.endpoint, **settings}
    )
    agent.kubeconfig = api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
    return agent


def start_with_process_class(admin: KubeClient, agent: AgentProcess) -> None:
    """The `host-processes` RuntimeClass (the kubenode-process handler), then the agent."""
    admin.create(
        RUNTIMECLASSES,
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "host-processes"},
            "handler": "kubenode-process",
        },
    )
    agent.start()


def main() -> int:
    with ContainerdProcess() as containerd, ApiServerProcess() as api:
        admin = KubeClient(load_kubeconfig(api.kubeconfig))
        agent = node_agent(api, containerd)
        try:
            start_with_process_class(admin, agent)
            process = create_and_time(admin, agent.node, "proc", process=True)
            cri = create_and_time(admin, agent.node, "cri", process=False)
            for kind, samples in (("process", process), ("CRI", cri)):
                report(
                    f"{kind} pod create -> Running p50 ({PODS_PER_KIND} pods)", percentile(samples, 50), "s"
                )
                report(
                    f"{kind} pod create -> Running p99 ({PODS_PER_KIND} pods)", percentile(samples, 99), "s"
                )
            report("CRI / process p50", percentile(cri, 50) / percentile(process, 50), "x")
        finally:
            status = close_reporting_leaks(agent, admin)
    return status


if __name__ == "__main__":
    sys.exit(main())
