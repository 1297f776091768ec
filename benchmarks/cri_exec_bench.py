"""`kubectl exec` into a CRI pod against a process pod on one agent, in one run (needs root and containerd:
`make containerd-deps`).

A real `kubenode apiserver`, a real containerd with a private config and one agent with
`containerRuntimeEndpoint`; one pod with an image (its exec goes CRI Exec -> the agent's WebSocket-to-SPDY
proxy -> containerd's streaming server) and one with the `kubenode-process` RuntimeClass (the agent forks
the command itself). Prints, for each kind:
- `kubectl exec <pod> -- true` p50 and p99 over ROUNDS runs (taken in turns), and the CRI / process ratio;
- the throughput of STREAM_BYTES through stdout (`busybox head -c N /dev/zero`) and through stdin
  (`kubectl exec -i ... -- busybox wc -c`), and the ratios.
Everything it makes is removed at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchstats import percentile, report
from cri_bench import node_agent, pod, start_with_process_class
from exec_bench import KUBECTL, timed_kubectl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.agent import close_reporting_leaks
from harness.apiserver import ApiServerProcess
from harness.containerd import ContainerdProcess
from kubenode.kubeclient import PODS, KubeClient, load_kubeconfig

ROUNDS = 20
STREAM_BYTES = 32 * 2**20


def wait_running(admin: KubeClient, name: str) -> None:
    deadline = time.monotonic() + 120
    while admin.get(PODS, name, "default").get("status", {}).get("phase") != "Running":
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} is not Running within 120 s")
        time.sleep(0.1)


def stream_seconds(kubeconfig: Path, name: str, *, through_stdin: bool) -> float:
    """Seconds to move STREAM_BYTES through the exec's stdout, or its stdin (checked at the other end)."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    if through_stdin:
        args, data = ["exec", "-i", name, "--", "/bin/busybox", "wc", "-c"], bytes(STREAM_BYTES)
    else:
        args, data = ["exec", name, "--", "/bin/busybox", "head", "-c", str(STREAM_BYTES), "/dev/zero"], b""
    began = time.perf_counter()
    done = subprocess.run([str(KUBECTL), *args], input=data, capture_output=True, env=env, timeout=300)
    took = time.perf_counter() - began
    moved = int(done.stdout.strip() or 0) if through_stdin else len(done.stdout)
    if done.returncode != 0 or moved != STREAM_BYTES:
        raise RuntimeError(f"kubectl {' '.join(args)}: moved {moved} bytes: {done.stderr.decode()}")
    return took


def main() -> int:
    with ContainerdProcess() as containerd, ApiServerProcess() as api:
        admin = KubeClient(load_kubeconfig(api.kubeconfig))
        agent = node_agent(api, containerd, nodeIp="127.0.0.1")
        try:
            start_with_process_class(admin, agent)
            kinds = {"CRI": "exec-cri", "process": "exec-proc"}
            for kind, name in kinds.items():
                admin.create(PODS, pod(name, agent.node, process=kind == "process"), "default")
            for name in kinds.values():
                wait_running(admin, name)
                timed_kubectl(api.kubeconfig, "exec", name, "--", "true")  # warm: the review is cached
            samples: dict[str, list[float]] = {kind: [] for kind in kinds}
            for _ in range(ROUNDS):
                for kind, name in kinds.items():
                    samples[kind].append(timed_kubectl(api.kubeconfig, "exec", name, "--", "true"))
            rates: dict[tuple[str, bool], float] = {}
            for kind, name in kinds.items():
                for through_stdin in (False, True):
                    seconds = stream_seconds(api.kubeconfig, name, through_stdin=through_stdin)
                    rates[kind, through_stdin] = STREAM_BYTES / 2**20 / seconds
            for kind in kinds:
                report(f"{kind} pod: kubectl exec -- true p50", percentile(samples[kind], 50) * 1000, "ms")
                report(f"{kind} pod: kubectl exec -- true p99", percentile(samples[kind], 99) * 1000, "ms")
                report(f"{kind} pod: exec stdout throughput", rates[kind, False], "MiB/s")
                report(f"{kind} pod: exec stdin throughput", rates[kind, True], "MiB/s")
            ratio = percentile(samples["CRI"], 50) / percentile(samples["process"], 50)
            report("exec -- true p50, CRI / process", ratio, "x")
            report("stdout throughput, CRI / process", rates["CRI", False] / rates["process", False], "x")
            report("stdin throughput, CRI / process", rates["CRI", True] / rates["process", True], "x")
            for name in kinds.values():
                admin.delete(PODS, name, "default")
        finally:
            status = close_reporting_leaks(agent, admin)
    return status


if __name__ == "__main__":
    sys.exit(main())
