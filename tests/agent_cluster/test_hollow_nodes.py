"""Hollow nodes against the real API server: three of them in one `python -m agent.hollow` process
register (with the fake plugin's devices), hold Leases, run the pods bound to them (one bound later
by a Binding) to Running, and carry out their deletions; the ledger shows each pod started once on
its own node and stopped once; no process was started and no cgroup made. With either driver: on
gevent's loop the whole fleet is one OS thread (and a few of gevent's own at most), on threads each
node keeps the agent's threads."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.apiserver import REPO, ApiServerProcess
from kubenode.kubeclient import KubeClient
from kubenode.kubeclient.client import LEASES, NODES, PODS
from tests.agent_cluster.support import gone, phase_is, pod_body, wait_until

NODE_COUNT = 3
# Well under the 3 x 10 threads of the threads driver: gevent may keep a small pool of its own.
MOST_GEVENT_THREADS = 8


@pytest.mark.parametrize("driver", ["gevent", "threads"])
def test_hollow_nodes_register_run_and_delete_pods(
    api: ApiServerProcess, admin: KubeClient, tmp_path: Path, driver: str
) -> None:
    prefix = f"hollow-{driver[0]}"
    node_names = [f"{prefix}{i}" for i in range(NODE_COUNT)]
    ledger = tmp_path / "ledger"
    command = [sys.executable, "-m", "agent.hollow", "--kubeconfig", str(api.kubeconfig), "--nodes", "3"]
    command += [
        "--driver",
        driver,
        "--prefix",
        prefix,
        "--start-spread",
        "0",
        "--state-dir",
        str(tmp_path / "state"),
        "--ledger",
        str(ledger),
    ]
    fleet = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert fleet.stdout is not None
        first = fleet.stdout.readline().strip()
        if first != "ready 3":
            fleet.kill()
            raise AssertionError(f"the fleet said {first!r}: {fleet.communicate()[1]}")

        def registered() -> list[dict[str, object]] | None:
            nodes = [
                n
                for n in admin.list(NODES, label_selector="kubenode.io/hollow=true")["items"]
                if n["metadata"]["name"].startswith(prefix)
            ]
            ready = [
                n
                for n in nodes
                if any(
                    c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", [])
                )
                and n["status"]["capacity"].get("hollow.kubenode.io/gpu") == "8"
            ]
            return ready if len(ready) == 3 else None

        assert (
            sorted(n["metadata"]["name"] for n in wait_until(registered, 30, "3 Ready hollow nodes"))
            == node_names
        )
        threads = len(os.listdir(f"/proc/{fleet.pid}/task"))
        if driver == "gevent":
            assert threads <= MOST_GEVENT_THREADS, f"{threads} OS threads for {NODE_COUNT} nodes on gevent"
        else:
            assert threads >= NODE_COUNT * 9, f"{threads} OS threads for {NODE_COUNT} nodes on threads"

        def leases_held() -> bool:
            leases = admin.list(LEASES, "kube-node-lease")["items"]
            return {lease["spec"]["holderIdentity"] for lease in leases} >= set(node_names)

        wait_until(leases_held, 30, "a Lease held by each node")  # its own loop: may follow the Node

        pods = {f"hp{driver[0]}-{i}": node_names[i % 3] for i in range(6)}
        for name, node in pods.items():
            admin.create(PODS, pod_body(name, node, grace=5), "default")
        late_name = f"hp{driver[0]}-late"
        late = pod_body(late_name, "", grace=5)
        del late["spec"]["nodeName"]
        admin.create(PODS, late, "default")
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": late_name}}
        admin.create(
            PODS,
            {**binding, "target": {"name": node_names[1]}},
            "default",
            name=late_name,
            subresource="binding",
        )
        pods[late_name] = node_names[1]
        uids = {}
        for name in pods:
            status = wait_until(functools.partial(phase_is, admin, name, "Running"), 30, f"{name} Running")
            assert status["containerStatuses"][0]["state"]["running"]
            uids[admin.get(PODS, name, "default")["metadata"]["uid"]] = pods[name]
        for name in pods:
            admin.delete(PODS, name, "default")
        for name in pods:
            wait_until(functools.partial(gone, admin, name), 30, f"{name} deleted by its node")
    finally:
        fleet.terminate()
        _, err = fleet.communicate(timeout=60)
    assert fleet.returncode == 0, err

    lines = [line.split() for line in ledger.read_text().splitlines()]
    starts = Counter((words[1], words[2]) for words in lines if words[0] == "start")
    stops = Counter((words[1], words[2]) for words in lines if words[0] == "stop")
    expected = Counter((node, uid) for uid, node in uids.items())
    assert starts == expected and stops == expected
    assert not list(Path("/sys/fs/cgroup").glob("*/hollow*"))
