"""Stats and log rotation of CRI pods, through the real kubectl, the API server, the agent and containerd.

One API server, one containerd and one agent for the module; the agent rotates logs over 8 KiB every 0.3 s
(containerLogMaxSize, containerLogMonitorInterval), keeping 3 files (containerLogMaxFiles).
- stats: a two-container pod (one burning a quarter of a core, one holding memory) shows both containers
  in /stats/summary (from containerd's ListPodSandboxStats) and in `kubectl top pod --containers`;
- logs: a chatty container's log is renamed and reopened (ReopenContainerLog), older files gzipped, at most
  two rotated kept; `kubectl logs` shows the kept lines and `--tail` the latest, and `kubectl logs -f`
  follows across rotations without losing or repeating a line.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.container.podrecord import RUNNING, ContainerRecord, PodRecord
from agent.container.usage import PodUsage, Usage
from agent.kuberuntime.cri.client import CRIClient
from agent.stats.cri import CRIStats
from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.containerd import ContainerdProcess
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.kubeclient import PODS, KubeClient
from tests.agent_cluster.support import gone, wait_until
from tests.apiserver.kubectl_support import Kubectl
from tests.cri.conftest import joined_agent
from tests.cri.test_cri_pods import apply, image_pod, running

MAX_FILES = 3
# The busybox image's applets: a number and a hundred bytes a line, about a hundred lines a second.
CHATTY = 'p=$(printf %0100d 0); i=0; while true; do i=$((i+1)); echo "line $i $p"; sleep 0.01; done'
LINE = re.compile(r"^line (\d+) 0{100}$")


@pytest.fixture(scope="module")
def agent(api: ApiServerProcess, containerd: ContainerdProcess, logs_dir: Path) -> Iterator[AgentProcess]:
    yield from joined_agent(
        api,
        containerd,
        logs_dir,
        containerLogMaxSize="8Ki",
        containerLogMaxFiles=MAX_FILES,
        containerLogMonitorInterval=0.3,
    )


def summary_pod(agent: AgentProcess, name: str) -> dict[str, Any] | None:
    with urllib.request.urlopen(f"http://{agent.status_address}/stats/summary", timeout=10) as answer:
        summary = json.loads(answer.read())
    return next((p for p in summary["pods"] if p["podRef"]["name"] == name), None)


def read_directly(endpoint: str, node: str, uid: str, *, sandbox_stats: bool) -> PodUsage:
    """CRIStats against the real containerd, on either path, for the agent's pod."""
    client = CRIClient.connect(endpoint)
    try:
        selector = {"io.kubernetes.pod.uid": uid}
        listed = client.call(
            client.runtime.ListContainers,
            cri.ListContainersRequest(filter=cri.ContainerFilter(label_selector=selector)),
        ).containers
        ids = {c.metadata.name: c.id for c in listed if c.state == cri.CONTAINER_RUNNING}
        record = PodRecord(uid=uid, namespace="default", name="cri-burner")
        for name in ids:
            record.containers[name] = ContainerRecord(name, state=RUNNING)
        stats = CRIStats(lambda method, request: client.call(getattr(client.runtime, method), request), node)
        stats.sandbox_stats = sandbox_stats
        return stats.pod_usage(record, ids, lambda: (Usage(1, 1, 1), set()))  # the agent's cgroup reading
    finally:
        client.close()


def test_a_cri_pods_containers_show_in_the_summary_and_kubectl_top(
    agent: AgentProcess,
    admin: KubeClient,
    kubectl: Kubectl,
    containerd: ContainerdProcess,
    tmp_path: Path,
) -> None:
    body = image_pod(
        "cri-burner",
        agent.node,
        "while true; do :; done",
        resources={"limits": {"cpu": "250m", "memory": "64Mi"}},  # little to take from a shared machine
    )
    # 10 MB held in a shell variable: memory that kubectl top shows in Mi (the loop keeps the shell from
    # exec'ing its last command, which would drop the variable).
    hold = "x=$(printf %010000000d 0); while true; do sleep 600; done"
    body["spec"]["containers"].append(
        {**body["spec"]["containers"][0], "name": "hold", "command": ["/bin/sh", "-c", hold]}
    )
    apply(kubectl, tmp_path, body)
    wait_until(lambda: running(admin, "cri-burner"), 60, "cri-burner Running")

    def burning() -> dict[str, Any] | None:
        # usageNanoCores is a rate from the previous reading of the container on: wait for the second.
        pod = summary_pod(agent, "cri-burner")
        containers = {c["name"]: c for c in (pod or {}).get("containers") or []}
        burn = containers.get("main", {}).get("cpu", {}).get("usageNanoCores", 0)
        held = containers.get("hold", {}).get("memory", {}).get("workingSetBytes", 0)
        return pod if burn > 0 and held > 5 * 2**20 else None

    pod = wait_until(burning, 30, "the burner's CPU and the holder's memory in /stats/summary")
    assert pod["cpu"]["usageCoreNanoSeconds"] >= pod["containers"][0]["cpu"]["usageCoreNanoSeconds"] > 0
    assert pod["memory"]["workingSetBytes"] > 5 * 2**20
    assert pod["process_stats"]["process_count"] >= 1
    with urllib.request.urlopen(f"http://{agent.status_address}/metrics/resource", timeout=10) as answer:
        text = answer.read().decode()
    for container in ("main", "hold"):
        labels = f'{{container="{container}",namespace="default",pod="cri-burner"}}'
        assert f"\ncontainer_cpu_usage_seconds_total{labels} " in text
        assert f"\ncontainer_memory_working_set_bytes{labels} " in text
    assert "\nresource_scrape_error 0" in text
    # Both of CRIStats' paths against containerd 1.6: ListPodSandboxStats (what the agent used), and
    # ListContainerStats with the pod cgroup (for a runtime without it).
    uid = pod["podRef"]["uid"]
    for sandbox_stats in (True, False):
        read = read_directly(containerd.endpoint, agent.node, uid, sandbox_stats=sandbox_stats)
        assert set(read.containers) == {"main", "hold"}
        assert read.containers["main"].cpu_ns > 0 and read.containers["hold"].memory_working_set > 5 * 2**20
        assert (read.pod.cpu_ns > read.containers["main"].cpu_ns) == sandbox_stats  # else the cgroup's

    def top_rows() -> dict[str, list[str]] | None:
        # On a loaded machine the burner may have had no CPU in a window: wait for one where it had.
        top = kubectl.run("top", "pod", "cri-burner", "--containers", check=False)
        if top.returncode != 0:
            return None  # the API server's first scrape of the node is not rated yet
        header, *rows = top.stdout.splitlines()
        assert header.split() == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
        by_name = {row.split()[1]: row.split() for row in rows}
        return by_name if int(by_name["main"][2].rstrip("m")) > 0 else None

    rows = wait_until(top_rows, 60, "the burner using CPU in kubectl top pod")
    assert set(rows) == {"main", "hold"}
    assert int(rows["main"][2].rstrip("m")) <= 300  # under its 250m limit, allowing for the window's edges
    assert int(rows["hold"][3].rstrip("Mi")) >= 5
    kubectl.run("delete", "pod", "cri-burner", "--wait=false")
    wait_until(lambda: gone(admin, "cri-burner"), 60, "cri-burner deleted")


def numbers(text: str) -> list[int]:
    found = []
    for line in text.splitlines():
        match = LINE.match(line)
        assert match is not None, f"not a whole line of the container's: {line!r}"
        found.append(int(match.group(1)))
    return found


def test_a_cri_containers_log_is_rotated_reopened_and_still_read(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, logs_dir: Path, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, image_pod("cri-chatty", agent.node, CHATTY))
    wait_until(lambda: running(admin, "cri-chatty"), 60, "cri-chatty Running")
    uid = admin.get(PODS, "cri-chatty", "default")["metadata"]["uid"]
    container_dir = logs_dir / f"default_cri-chatty_{uid}" / "main"
    followed: list[str] = []
    follow = kubectl.popen("logs", "-f", "cri-chatty", "--tail=1")
    reader = threading.Thread(target=lambda: followed.extend(iter(follow.stdout.readline, "")))  # type: ignore[union-attr]
    reader.start()
    try:
        # Rotated and reopened: `0.log.<time>` files, the older ones gzipped, none rotated in place.
        wait_until(lambda: list(container_dir.glob("0.log.*.gz")), 60, "a compressed rotated log")
        wait_until(lambda: len(followed) > 400, 60, "kubectl logs -f across the rotations")
    finally:
        follow.kill()
        follow.wait(10)
        reader.join(10)
    rotated = sorted(p.name for p in container_dir.glob("0.log.*"))
    assert 1 <= len(rotated) <= MAX_FILES - 1, rotated
    assert not list(container_dir.glob(".0.log.meta"))
    with gzip.open(container_dir / next(n for n in rotated if n.endswith(".gz")), "rt") as f:
        first = f.readline()
    assert re.match(r"^\S+Z stdout F line \d+ 0{100}$", first.rstrip("\n")), first
    # Followed across several renames: every line once, in order, none lost at a reopen.
    seen = numbers("".join(followed[:-1]))  # the last may be cut by the kill
    assert seen == list(range(seen[0], seen[0] + len(seen)))
    # A read goes through the kept files (gzipped, renamed, live): whole lines, consecutive, the oldest ones
    # gone, the newest there even when a rotation has just emptied the live file.
    shown = numbers(kubectl.out("logs", "cri-chatty"))
    assert shown and shown == list(range(shown[0], shown[0] + len(shown)))
    assert shown[-1] > seen[-1] and shown[0] > 1
    latest = numbers(kubectl.out("logs", "cri-chatty", "--tail=3"))
    assert len(latest) == 3 and latest[0] >= shown[-1] - 2
    kubectl.run("delete", "pod", "cri-chatty", "--wait=false")
    wait_until(lambda: gone(admin, "cri-chatty"), 60, "cri-chatty deleted")
    wait_until(lambda: not container_dir.exists(), 20, "the pod's logs removed")
