"""The Topology Manager end to end, through the API server: real agents with a device plugin serving two
static resources on two NUMA nodes (example.com/dongle, example.com/accel) and the CPU backend over a fake
sysfs with two nodes (kubenode.io/cpu: CPU 0 on node 0, CPU 1 on node 1, this machine's two CPUs).

- single-numa-node: an aligned pod gets its CPU and dongle from one node; a pod no single node can hold
  fails with TopologyAffinityError (kube's message and event) and holds nothing; `kubenode trace` shows
  the hints and the merged affinity; the node publishes its NodeResourceTopology;
- best-effort: the same pod runs;
- two agents under the live scheduler: the pod lands only on the node that can align it.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from cli.agentstatus import agent_pods
from cli.podtrace import topology_lines
from harness.agent import REPO, AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import NODE_RESOURCE_TOPOLOGIES, NODES, PODS, KubeClient, NotFound
from tests.agent_cluster.support import events_for, phase_is, pod_body, wait_until

CPU, DONGLE, ACCEL = "kubenode.io/cpu", "example.com/dongle", "example.com/accel"
MESSAGE = "Resources cannot be allocated with Topology locality"


def fake_sysfs(root: Path, numa_of_cpu: dict[int, int], nodes: int = 2) -> Path:
    """devices/system/{cpu,node}: the CPUs online, each node's cpulist and its distance row (nodes 0 and 1,
    or node 0 alone as on this machine)."""
    (root / "devices/system/cpu").mkdir(parents=True)
    (root / "devices/system/cpu/online").write_text(",".join(map(str, sorted(numa_of_cpu))) + "\n")
    rows = ("10 21\n", "21 10\n") if nodes == 2 else ("10\n",)
    for node, row in enumerate(rows):
        directory = root / "devices/system/node" / f"node{node}"
        directory.mkdir(parents=True)
        cpus = [c for c, n in numa_of_cpu.items() if n == node]
        (directory / "cpulist").write_text(",".join(map(str, cpus)) + "\n")
        (directory / "distance").write_text(row)
    return root


def agent_with_devices(
    make_agent: Callable[..., AgentProcess],
    tmp: Path,
    policy: str,
    numa_of_cpu: dict[int, int],
    dongles: dict[str, int],
    accels: dict[str, int] | None = None,
    sysfs_nodes: int = 2,
) -> AgentProcess:
    """An agent whose plugin serves the CPUs of a fake sysfs, and dongles (and accels) on the given NUMA
    nodes."""
    sysfs = fake_sysfs(tmp / "sysfs", numa_of_cpu, sysfs_nodes)
    agent = make_agent(settings={"topologyManagerPolicy": policy, "sysfsRoot": str(sysfs)})
    config = {
        "version": "v1",
        "resources": [
            {
                "name": CPU,
                "backend": "cpu",
                "cpu": {"unit": "thread", "reserved": "", "sysfsRoot": str(sysfs), "cdi": False},
            },
            *(
                {
                    "name": name,
                    "backend": "static",
                    "static": {"devices": [{"id": d, "numa": n} for d, n in ids.items()]},
                }
                for name, ids in ((DONGLE, dongles), (ACCEL, accels or {}))
                if ids
            ),
        ],
    }
    (tmp / "plugin.yaml").write_text(yaml.safe_dump(config))
    agent.start()
    agent.plugin = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "deviceplugin", "--config", str(tmp / "plugin.yaml"),
         "--kubelet-dir", str(agent.plugin_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, env=agent.env(), cwd=REPO,
    )  # fmt: skip
    return agent


def allocatable_ready(admin: KubeClient, node: str, cpus: int, dongles: int, accels: int = 0) -> bool:
    allocatable = admin.get(NODES, node)["status"]["allocatable"]
    want = {CPU: str(cpus), DONGLE: str(dongles), **({ACCEL: str(accels)} if accels else {})}
    return all(allocatable.get(name) == amount for name, amount in want.items())


def resources(cpu: int, dongle: int, accel: int = 0) -> dict[str, Any]:
    amounts = {CPU: str(cpu), DONGLE: str(dongle), **({ACCEL: str(accel)} if accel else {})}
    return {"limits": amounts, "requests": amounts}


def agent_view(agent: AgentProcess, name: str) -> dict[str, Any]:
    items = agent_pods(agent.status_address)["items"]
    return next(i for i in items if i["metadata"]["name"] == name)


def topology_of(admin: KubeClient, node: str) -> dict[str, Any] | None:
    try:
        return admin.get(NODE_RESOURCE_TOPOLOGIES, node)
    except NotFound:
        return None


def publishes(admin: KubeClient, node: str, resource: str) -> bool:
    nrt = topology_of(admin, node)
    return nrt is not None and any(resource in zone for zone in available(nrt).values())


def available(nrt: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {z["name"]: {r["name"]: r["available"] for r in z["resources"]} for z in nrt["zones"]}


def test_single_numa_node_aligns_or_refuses(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess], tmp_path: Path
) -> None:
    two = {"dongle-0": 0, "dongle-1": 1}
    accels = {"accel-0": 0, "accel-1": 1}
    agent = agent_with_devices(make_agent, tmp_path, "single-numa-node", {0: 0, 1: 1}, two, accels)
    wait_until(
        lambda: allocatable_ready(admin, agent.node, 2, 2, 2), 30, "2 CPUs, dongles and accels allocatable"
    )
    nrt = wait_until(lambda: topology_of(admin, agent.node), 20, "the published NodeResourceTopology")
    attributes = {a["name"]: a["value"] for a in nrt["attributes"]}
    assert attributes["topologyManagerPolicy"] == "single-numa-node"
    assert attributes["topologyManagerScope"] == "container"

    # Two CPUs and a dongle: both CPUs together are only on two NUMA nodes, so no single node holds it.
    wide = f"wide-{agent.node}"
    admin.create(PODS, pod_body(wide, agent.node, resources=resources(2, 1)), "default")
    status = wait_until(lambda: phase_is(admin, wide, "Failed"), 30, "the unalignable pod Failed")
    assert (status["reason"], status["message"]) == ("TopologyAffinityError", MESSAGE)
    event = wait_until(lambda: events_for(admin, wide, "TopologyAffinityError"), 10, "its event")[0]
    assert event["type"] == "Warning" and event["message"] == MESSAGE
    assert agent_view(agent, wide)["kubenode"]["devices"] == {}
    refused = agent_view(agent, wide)["kubenode"]["topology"]["decisions"]
    assert [(d["merged"], d["admitted"]) for d in refused] == [("{any not preferred}", False)]
    assert refused[0]["hints"][CPU] == ["{0,1 preferred}"]

    # Nothing of it is held: the aligned pod gets a CPU, a dongle and an accel, all from one NUMA node.
    aligned = f"aligned-{agent.node}"
    admin.create(PODS, pod_body(aligned, agent.node, resources=resources(1, 1, 1)), "default")
    wait_until(lambda: phase_is(admin, aligned, "Running"), 30, "the aligned pod Running")
    devices = agent_view(agent, aligned)["kubenode"]["devices"]["main"]
    cpu, dongle, accel = devices[CPU][0], devices[DONGLE][0], devices[ACCEL][0]
    assert (cpu, dongle, accel) in (("cpu0", "dongle-0", "accel-0"), ("cpu1", "dongle-1", "accel-1")), devices
    decision = agent_view(agent, aligned)["kubenode"]["topology"]["decisions"][0]
    assert decision["admitted"] and decision["merged"] in ("{0 preferred}", "{1 preferred}")
    assert decision["hints"][CPU] == ["{0 preferred}", "{1 preferred}", "{0,1 not preferred}"]
    # The published topology follows: the other NUMA node is still whole.
    other = "node-1" if cpu == "cpu0" else "node-0"
    used = "node-0" if other == "node-1" else "node-1"
    wait_until(
        lambda: (
            available(topology_of(admin, agent.node) or {"zones": []}).get(used)
            == {ACCEL: "0", CPU: "0", DONGLE: "0"}
        ),
        20,
        f"{used} taken in the published topology",
    )
    assert available(topology_of(admin, agent.node) or {"zones": []})[other] == {
        ACCEL: "1",
        CPU: "1",
        DONGLE: "1",
    }
    # `kubenode trace` renders what the agent's /pods reports (its endpoint listens on loopback here, not on
    # the Node's address, so the test feeds the agent's view to the renderer directly).
    lines = topology_lines(agent_view(agent, aligned)["kubenode"]["topology"])
    assert lines[0] == "Topology   policy single-numa-node  scope container"
    assert f"             hints {CPU}: {{0 preferred}} {{1 preferred}} {{0,1 not preferred}}" in lines


def test_static_devices_on_a_node_sysfs_does_not_list_are_aligned_or_refused(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess], tmp_path: Path
) -> None:
    """Issue 37 on this machine's layout (sysfs lists node 0 only, both CPUs on it): dongles as its gpus (two
    on node 0, one on node 1), accels as its nics (one on node 0, two on node 1). A dongle and an accel came
    from different nodes; now each pod's come from one node, until no node can hold another pair."""
    gpus = {"dongle-0": 0, "dongle-1": 0, "dongle-2": 1}
    nics = {"accel-0": 0, "accel-1": 1, "accel-2": 1}
    agent = agent_with_devices(make_agent, tmp_path, "single-numa-node", {0: 0, 1: 0}, gpus, nics, 1)
    wait_until(
        lambda: allocatable_ready(admin, agent.node, 2, 3, 3), 30, "3 dongles and 3 accels allocatable"
    )
    pair = {"limits": {DONGLE: "1", ACCEL: "1"}, "requests": {DONGLE: "1", ACCEL: "1"}}
    placed = []
    for which in ("first", "second", "third"):
        name = f"{which}-{agent.node}"
        admin.create(PODS, pod_body(name, agent.node, resources=pair), "default")
        placed.append(name)
        if which == "third":
            break
        wait_until(functools.partial(phase_is, admin, name, "Running"), 30, f"the {which} pod Running")
    first, second = (agent_view(agent, name)["kubenode"] for name in placed[:2])
    assert first["topology"]["decisions"][0]["merged"] == "{0 preferred}"
    assert first["devices"]["main"][DONGLE][0] in ("dongle-0", "dongle-1")
    assert first["devices"]["main"][ACCEL] == ["accel-0"]
    # Node 0's only accel is taken: the second pair is node 1's, whole.
    assert second["topology"]["decisions"][0]["merged"] == "{1 preferred}"
    assert second["devices"]["main"][DONGLE] == ["dongle-2"]
    assert second["devices"]["main"][ACCEL][0] in ("accel-1", "accel-2")
    # A dongle is left on node 0 and an accel on node 1: the third is refused, never split.
    status = wait_until(lambda: phase_is(admin, placed[2], "Failed"), 30, "the third pod Failed")
    assert (status["reason"], status["message"]) == ("TopologyAffinityError", MESSAGE)
    assert agent_view(agent, placed[2])["kubenode"]["devices"] == {}


def test_best_effort_runs_the_same_pod(
    admin: KubeClient, make_agent: Callable[..., AgentProcess], tmp_path: Path
) -> None:
    agent = agent_with_devices(
        make_agent, tmp_path, "best-effort", {0: 0, 1: 1}, {"dongle-0": 0, "dongle-1": 1}
    )
    wait_until(lambda: allocatable_ready(admin, agent.node, 2, 2), 30, "2 CPUs and 2 dongles allocatable")
    wide = f"wide-{agent.node}"
    admin.create(PODS, pod_body(wide, agent.node, resources=resources(2, 1)), "default")
    wait_until(lambda: phase_is(admin, wide, "Running"), 30, "the wide pod Running under best-effort")
    decision = agent_view(agent, wide)["kubenode"]["topology"]["decisions"][0]
    assert decision["admitted"] and decision["merged"] == "{0,1 not preferred}"


def test_the_live_scheduler_binds_only_where_the_pod_aligns(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess], tmp_path: Path
) -> None:
    from kubenode.kubeclient import load_kubeconfig
    from scheduler.profile import Configuration
    from scheduler.runner import LiveScheduler, RunOptions

    # "apart": both CPUs on node 0, the dongle on node 1; "together": a CPU and the dongle on node 0.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    apart = agent_with_devices(make_agent, tmp_path / "a", "single-numa-node", {0: 0, 1: 0}, {"dongle-0": 1})
    together = agent_with_devices(
        make_agent, tmp_path / "b", "single-numa-node", {0: 0, 1: 1}, {"dongle-0": 0}
    )
    for node in (apart.node, together.node):
        wait_until(functools.partial(allocatable_ready, admin, node, 2, 1), 30, f"{node} allocatable")
        wait_until(
            functools.partial(publishes, admin, node, DONGLE), 20, f"{node}'s topology with its dongle"
        )
    scheduler = LiveScheduler(load_kubeconfig(api.kubeconfig), RunOptions(config=Configuration()))
    scheduler.start()
    try:
        body = pod_body(f"placed-{together.node}", "", resources=resources(1, 1))
        del body["spec"]["nodeName"]
        names = [apart.node, together.node]
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": names}]}
        body["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
        admin.create(PODS, body, "default")
        name = body["metadata"]["name"]

        def bound() -> str:
            return str(admin.get(PODS, name, "default")["spec"].get("nodeName") or "")

        wait_until(bound, 30, "the pod bound")
        wait_until(lambda: phase_is(admin, name, "Running"), 30, "the pod Running")
        assert admin.get(PODS, name, "default")["spec"]["nodeName"] == together.node
    finally:
        scheduler.stop()
