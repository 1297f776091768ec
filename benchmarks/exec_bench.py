"""`kubectl exec` round trip through a real `kubenode apiserver` to a real agent (needs root: real cgroups).

Prints, over ROUNDS runs each:
- `kubectl exec <pod> -- true`, p50 and p99: kubectl's start, the WebSocket through the API server (TLS,
  RBAC), the agent's mutual TLS and SubjectAccessReview (cached after the first), the fork into the pod
  cgroup, the exit code back;
- the floor for kubectl itself: `kubectl get pod <pod>` against the same server (the same process start,
  kubeconfig and TLS), and the ratio of the two p50s;
- the exec round trip without kubectl: a WebSocket client (aiohttp) opening pods/exec, running `true` and
  reading its Status, p50 and p99; the part of the time that is ours.
Everything it makes is removed at the end.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
from benchstats import percentile, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.agent import AgentProcess, close_reporting_leaks
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import PODS, KubeClient, load_kubeconfig

ROUNDS = 30
KUBECTL = Path(sys.executable).parent / "kubectl"


def timed_kubectl(kubeconfig: Path, *args: str) -> float:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    began = time.perf_counter()
    done = subprocess.run([str(KUBECTL), *args], capture_output=True, env=env, timeout=60)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.decode()}")
    return took


async def websocket_execs(api: ApiServerProcess, pod: str, rounds: int) -> list[float]:
    context = ssl.create_default_context(cafile=str(api.ca_file))
    url = (
        api.url.replace("https://", "wss://")
        + f"/api/v1/namespaces/default/pods/{pod}/exec?command=true&stdout=true&stderr=true"
    )
    samples = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {api.token}"}) as session:
        for _ in range(rounds):
            began = time.perf_counter()
            async with session.ws_connect(url, protocols=["v5.channel.k8s.io"], ssl=context) as ws:
                status = b""
                async for message in ws:
                    if message.type == aiohttp.WSMsgType.BINARY and message.data[:1] == b"\x03":
                        status = message.data
            samples.append(time.perf_counter() - began)
            if b"Success" not in status:
                raise RuntimeError(f"exec did not succeed: {status!r}")
    return samples


def main() -> int:
    if os.geteuid() != 0:
        print("exec_bench needs root (real cgroups)", file=sys.stderr)
        return 1
    with ApiServerProcess() as api:
        admin = KubeClient(load_kubeconfig(api.kubeconfig))
        agent = AgentProcess(api.kubeconfig, settings={"nodeIp": "127.0.0.1"})
        agent.kubeconfig = api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
        try:
            agent.start()
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "exec-bench", "namespace": "default"},
                "spec": {
                    "nodeName": agent.node,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": "x", "command": ["sleep", "600"]}],
                },
            }
            admin.create(PODS, body, "default")
            deadline = time.monotonic() + 60
            while admin.get(PODS, "exec-bench", "default").get("status", {}).get("phase") != "Running":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"exec-bench is not Running:\n{agent.log()}")
                time.sleep(0.1)
            timed_kubectl(api.kubeconfig, "exec", "exec-bench", "--", "true")  # warm: the review is cached
            execs = [timed_kubectl(api.kubeconfig, "exec", "exec-bench", "--", "true") for _ in range(ROUNDS)]
            gets = [timed_kubectl(api.kubeconfig, "get", "pod", "exec-bench") for _ in range(ROUNDS)]
            direct = asyncio.run(websocket_execs(api, "exec-bench", ROUNDS))
            report("kubectl exec -- true p50", percentile(execs, 50) * 1000, "ms")
            report("kubectl exec -- true p99", percentile(execs, 99) * 1000, "ms")
            report("kubectl get pod p50 (kubectl's own floor)", percentile(gets, 50) * 1000, "ms")
            report("exec p50 / get p50", percentile(execs, 50) / percentile(gets, 50), "x")
            report("WebSocket exec round trip p50", percentile(direct, 50) * 1000, "ms")
            report("WebSocket exec round trip p99", percentile(direct, 99) * 1000, "ms")
            admin.delete(PODS, "exec-bench", "default")
        finally:
            status = close_reporting_leaks(agent, admin)
    return status


if __name__ == "__main__":
    sys.exit(main())
