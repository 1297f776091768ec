"""The node survives its pods, end to end: the real API server, agent, controller manager and kubectl.

- With `nodefs.available<99%` (always met here) the Node reports DiskPressure, the controller manager
  taints it, and the eviction manager evicts the BestEffort pod first (one pod per round; the long
  evictionMonitoringPeriod keeps the next round away while the test looks) while the Guaranteed one,
  which asks for ephemeral storage, still runs.
- A pod over its ephemeral-storage limit is evicted with kube's message; a pod over its memory limit ends
  OOMKilled, as `kubectl get` shows.
- A chatty pod's `kubectl logs --tail=5` returns its latest lines across the rotations of its log.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.controllermanager import ControllerManagerProcess
from kubenode.kubeclient import NODES, PODS, KubeClient
from tests.agent_cluster.support import events_for, phase_is, pod_body, wait_until

REPO = Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".venv/bin/kubectl"
DISK_TAINT = ("node.kubernetes.io/disk-pressure", "NoSchedule")
# A round long enough that the pods are both admitted before the round that evicts (a second or two after
# they are made, loaded), and that the test sees the first eviction well before the next round (the status
# write follows the kill at once). The test lasts about one round.
ROUND_S = 10.0
QUIET = {"evictionHard": "memory.available<1Ki", "evictionMonitoringPeriod": 1.0}
# The API server reaches the agent (kubectl logs) at the Node's InternalIP; the agent listens on loopback.
LOOPBACK_NODE = {"nodeIp": "127.0.0.1"}


@pytest.fixture(scope="module")
def controller_manager(api: ApiServerProcess) -> Iterator[ControllerManagerProcess]:
    with ControllerManagerProcess(api.data_dir / "controller-manager.kubeconfig") as process:
        yield process


def kubectl(api: ApiServerProcess, *args: str) -> str:
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(api.kubeconfig), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def status_column(api: ApiServerProcess, name: str) -> str:
    row = kubectl(api, "get", "pod", name, "--no-headers").split()
    return row[2]


def condition(admin: KubeClient, node: str, kind: str) -> dict[str, Any] | None:
    for c in admin.get(NODES, node).get("status", {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return None


def test_disk_pressure_taints_the_node_and_evicts_besteffort_first(
    api: ApiServerProcess,
    admin: KubeClient,
    make_agent: Callable[..., AgentProcess],
    controller_manager: ControllerManagerProcess,
) -> None:
    agent = make_agent(settings={"evictionHard": "nodefs.available<99%", "evictionMonitoringPeriod": ROUND_S})
    agent.start()
    # DiskPressure=True means the first round (at the agent's start) is over; the pods come after it, so the
    # next round, ROUND_S later, is the first to see them, both at once.
    pressure = wait_until(
        lambda: (c := condition(admin, agent.node, "DiskPressure")) and c["status"] == "True" and c,
        30,
        "DiskPressure=True",
    )
    assert pressure["reason"] == "KubeletHasDiskPressure"
    guaranteed = {
        "requests": {"cpu": "100m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
        "limits": {"cpu": "100m", "memory": "64Mi"},
    }
    admin.create(PODS, pod_body("guaranteed", agent.node, resources=guaranteed, grace=1), "default")
    admin.create(PODS, pod_body("besteffort", agent.node, grace=1), "default")

    def taints() -> list[tuple[str, str]]:
        return [(t["key"], t["effect"]) for t in admin.get(NODES, agent.node)["spec"].get("taints") or []]

    wait_until(lambda: DISK_TAINT in taints(), 30, f"the disk-pressure taint\n{controller_manager.output()}")

    evicted = wait_until(lambda: phase_is(admin, "besteffort", "Failed"), 3 * ROUND_S + 30, "the eviction")
    # At this moment the Guaranteed pod still runs: one pod per round, and it ranks after the BestEffort one.
    assert phase_is(admin, "guaranteed", "Running"), admin.get(PODS, "guaranteed", "default")["status"]
    assert evicted["reason"] == "Evicted"
    assert evicted["message"].startswith(
        "The node was low on resource: ephemeral-storage. Threshold quantity: "
    )
    found = functools.partial(events_for, admin, "besteffort", "Evicted")
    (event,) = wait_until(found, 10, "the Evicted event")
    assert event["type"] == "Warning" and event["message"] == evicted["message"]
    # kubectl reads it (its STATUS column shows the killed container's Error, as with a kubelet's eviction).
    shown = kubectl(api, "get", "pod", "besteffort", "-o", "jsonpath={.status.phase} {.status.reason}")
    assert shown == "Failed Evicted"


def test_ephemeral_storage_limit_and_oomkilled(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent(settings=QUIET).start()
    limited = {"limits": {"ephemeral-storage": "1Mi"}}
    writer = "yes 0123456789abcdef0123456789abcdef | head -c 2097152; sleep 600"
    admin.create(PODS, pod_body("writer", agent.node, writer, resources=limited, grace=1), "default")
    hog = pod_body(
        "hog",
        agent.node,
        "python3 -c \"x = b'a' * (200 << 20); print(len(x))\"",
        resources={"limits": {"memory": "32Mi", "cpu": "500m"}},
        restart_policy="Never",
    )
    admin.create(PODS, hog, "default")

    evicted = wait_until(lambda: phase_is(admin, "writer", "Failed"), 60, "the writer's eviction")
    assert evicted["reason"] == "Evicted"
    over = "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi."
    assert evicted["message"] == over
    wait_until(functools.partial(events_for, admin, "writer", "Evicted"), 10, "the Evicted event")

    ended = wait_until(lambda: phase_is(admin, "hog", "Failed"), 60, "the hog to end")
    terminated = ended["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)
    assert status_column(api, "hog") == "OOMKilled"


def test_kubectl_logs_tail_reads_across_rotations(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    settings = {**QUIET, **LOOPBACK_NODE, "containerLogMaxSize": "64Ki", "containerLogMaxFiles": 3}
    agent = make_agent(settings={**settings, "containerLogMonitorInterval": 0.2}).start()
    chatty = "i=0; while :; do echo line-$i; i=$((i+1)); done"
    admin.create(PODS, pod_body("chatty", agent.node, chatty, grace=1), "default")
    wait_until(lambda: phase_is(admin, "chatty", "Running"), 30, "chatty Running")

    def rotated() -> list[Path]:
        return sorted(agent.state.rglob("0.log.*"))

    files = wait_until(lambda: len(rotated()) >= 2 and rotated(), 60, "two rotated log files")
    oldest = files[0].read_text().splitlines()
    last_rotated = int(oldest[-1].removeprefix("line-"))
    lines = kubectl(api, "logs", "chatty", "--tail=5").splitlines()
    assert len(lines) == 5 and all(line.startswith("line-") for line in lines), lines
    numbers = [int(line.removeprefix("line-")) for line in lines]
    assert numbers == list(range(numbers[0], numbers[0] + 5)), numbers
    assert numbers[0] > last_rotated, "the tail is the latest lines, not a rotated file's"
    on_disk = sum(p.stat().st_blocks * 512 for p in files[0].parent.iterdir())
    assert on_disk < 3 * 64 * 1024 + 4 * 2**20, on_disk
