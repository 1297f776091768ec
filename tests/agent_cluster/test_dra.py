"""DRA end to end with real processes: `kubenode apiserver`, the agent (as its node) and `kubenode
dra-driver` (as that node, on the host's real CPUs).

Always: the driver registers with the agent through the agent's plugins registry directory, and a pod whose
claim cannot be prepared starts no container (FailedPrepareDynamicResources, retried). Where the API server
serves resource.k8s.io/v1 (the draapi issue), also: the driver's ResourceSlice is published, a claim for
one `cpu.kubenode.io` device allocated to a pod is prepared, the pod Runs pinned (`Cpus_allowed_list` is
exactly the allocated CPU), and after the pod is deleted the driver's CDI spec for the claim is gone.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.cm.cgroups import make_pod_cgroups
from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import PODS, KubeClient
from kubenode.kubeclient.client import Resource
from tests.agent_cluster.support import events_for, gone, phase_is, pod_body, wait_until
from tests.agent_dra.test_killagent import leaders
from tests.agent_dra.test_pinned import cpus_allowed
from tests.dradriver.test_slices import serves_resource_group

REPO = Path(__file__).resolve().parents[2]
SLICES = Resource("resourceslices", "ResourceSlice", group="resource.k8s.io", version="v1", namespaced=False)
CLAIMS = Resource("resourceclaims", "ResourceClaim", group="resource.k8s.io", version="v1")


@pytest.fixture
def driver_for(api: ApiServerProcess) -> Iterator[Callable[[AgentProcess], subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(agent: AgentProcess) -> subprocess.Popen[str]:
        kubeconfig = api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
        config = agent.dir / "dra.yaml"
        config.write_text("drivers: [cpu.kubenode.io]\n")
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "dra-driver", "--kubeconfig", str(kubeconfig),
             "--node-name", agent.node, "--registry-dir", str(agent.dir / "plugins_registry"),
             "--plugin-dir", str(agent.dir / "plugins"), "--cdi-dir", str(agent.dir / "cdi"),
             "--config", str(config)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        started.append(process)
        return process

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def test_claim_pod_end_to_end(
    admin: KubeClient,
    make_agent: Callable[..., AgentProcess],
    driver_for: Callable[[AgentProcess], subprocess.Popen[str]],
) -> None:
    agent = make_agent().start()
    driver_for(agent)
    wait_until(lambda: "DRA driver cpu.kubenode.io registered" in agent.log(), 30, "the driver registered")

    if not serves_resource_group(admin):
        # No claim can be read: the pod's container must not start; the agent says why, as an event.
        name = f"claimless-{agent.node}"
        body = pod_body(name, agent.node)
        body["spec"]["resourceClaims"] = [{"name": "cpus", "resourceClaimName": "cpus"}]
        body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "cpus"}]}
        admin.create(PODS, body, "default")
        [event] = wait_until(
            lambda: events_for(admin, name, "FailedPrepareDynamicResources"), 30, "the event"
        )
        assert "ResourceClaim default/cpus" in event["message"]
        assert not phase_is(admin, name, "Running")
        statuses = (admin.get(PODS, name, "default").get("status") or {}).get("containerStatuses") or []
        assert all("running" not in (c.get("state") or {}) and not c.get("started") for c in statuses), (
            statuses
        )
        admin.delete(PODS, name, "default", grace_period_seconds=0)
        wait_until(lambda: gone(admin, name), 30, "the pod gone")
        return

    slice_ = wait_until(lambda: admin.get(SLICES, f"{agent.node}-cpu-kubenode-io"), 30, "the driver's slice")
    device = slice_["spec"]["devices"][-1]["name"]
    cpu = int(device.removeprefix("cpu-"))
    name = f"pinned-{agent.node}"
    claim = admin.create(
        CLAIMS, {"metadata": {"name": name}, "spec": {"devices": {"requests": []}}}, "default"
    )
    body = pod_body(name, agent.node, "grep Cpus_allowed_list /proc/self/status; sleep 600")
    body["spec"]["resourceClaims"] = [{"name": "cpus", "resourceClaimName": name}]
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "cpus"}]}
    pod = admin.create(PODS, body, "default")
    result = {"request": "cpus", "driver": "cpu.kubenode.io", "pool": agent.node, "device": device}
    claim["status"] = {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}],
    }
    admin.update(CLAIMS, claim, subresource="status")
    wait_until(lambda: phase_is(admin, name, "Running"), 60, "the pod Running")
    spec = agent.dir / "cdi" / f"kubenode-dra_cpu.kubenode.io_{claim['metadata']['uid']}.json"
    assert spec.exists()
    cgroups = make_pod_cgroups(agent.root)
    [pid] = wait_until(lambda: leaders(cgroups.pids(pod["metadata"]["uid"])), 30, "the container's process")
    assert cpus_allowed(pid) == str(cpu)
    admin.delete(PODS, name, "default", grace_period_seconds=0)
    wait_until(lambda: gone(admin, name), 60, "the pod gone")
    wait_until(lambda: not spec.exists(), 30, "the claim's CDI spec removed")
