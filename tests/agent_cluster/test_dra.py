"""DRA end to end with real processes: `kubenode apiserver`, `kubenode scheduler run`, `kubenode
controller-manager`, the agent (as its node) and `kubenode dra-driver` (as that node, on the host's real
CPUs).

The driver registers with the agent through the agent's plugins registry directory and publishes its
ResourceSlice. A pod whose claim comes from a ResourceClaimTemplate gets it from the claim controller; the
scheduler allocates one `cpu.kubenode.io` device and binds the pod; the agent prepares the claim through
the driver. The agent is SIGKILLed as soon as the driver has written the claim's CDI spec (after prepare,
about when the container starts) and started again on the same state: one prepared claim, one running
container, its `Cpus_allowed_list` exactly the allocated CPU. Deleting the pod unprepares the claim (its
CDI spec is gone) and, the claim being the template's, the controller deletes it. A pod whose claim does
not exist starts no container (FailedPrepareDynamicResources, retried).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from agent.cm.cgroups import make_pod_cgroups
from controllers.resources import RESOURCE_CLAIM_TEMPLATES
from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.controllermanager import ControllerManagerProcess
from kubenode.kubeclient import (
    DEVICE_CLASSES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    AlreadyExists,
    KubeClient,
)
from tests.agent_cluster.support import events_for, gone, phase_is, pod_body, wait_until
from tests.agent_dra.test_killagent import leaders
from tests.agent_dra.test_pinned import cpus_allowed
from tests.dra_e2e.test_dra_e2e import claim_gone, claim_of, device_class
from tests.scheduler_live.support import SchedulerProcess

REPO = Path(__file__).resolve().parents[2]
DRIVER = "cpu.kubenode.io"
GROUP_VERSION = "resource.k8s.io/v1"


@pytest.fixture
def driver_for(api: ApiServerProcess) -> Iterator[Callable[[AgentProcess], subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []

    def start(agent: AgentProcess) -> subprocess.Popen[str]:
        kubeconfig = api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
        config = agent.dir / "dra.yaml"
        config.write_text(f"drivers: [{DRIVER}]\n")
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


def dra_agent(make_agent: Callable[..., AgentProcess]) -> AgentProcess:
    """An agent that reads CDI specs where its driver writes them (`<agent dir>/cdi`, not the host's
    /etc/cdi and /var/run/cdi): process pods apply a claim's CDI devices, an unresolvable name is
    CreateContainerError."""
    agent = make_agent()
    config = yaml.safe_load(agent.config_path.read_text())
    config["cdiSpecDirs"] = [str(agent.dir / "cdi")]
    agent.config_path.write_text(yaml.safe_dump(config))
    return agent.start()


@pytest.fixture
def control_plane(api: ApiServerProcess, tmp_path: Path) -> Iterator[None]:
    """The scheduler (it allocates claims) and the controller manager (it makes claims from templates)."""
    scheduler = SchedulerProcess(api.data_dir / "scheduler.kubeconfig", log_path=tmp_path / "scheduler.log")
    manager = ControllerManagerProcess(api.data_dir / "controller-manager.kubeconfig")
    try:
        yield
    finally:
        manager.close()
        scheduler.stop()


def claim_template(admin: KubeClient, name: str) -> None:
    with contextlib.suppress(AlreadyExists):
        admin.create(DEVICE_CLASSES, device_class(DRIVER))
    admin.create(RESOURCE_CLAIM_TEMPLATES, {
        "apiVersion": GROUP_VERSION, "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "cpu", "exactly": {"deviceClassName": DRIVER}}]}}},
    }, "default")  # fmt: skip


def kill_when_prepared(agent: AgentProcess, cdi_dir: Path) -> threading.Event:
    """SIGKILL the agent as soon as a claim spec of the driver appears: prepared, container not yet seen."""
    killed = threading.Event()

    def watch() -> None:
        while not killed.is_set():
            if any(cdi_dir.glob(f"kubenode-dra_{DRIVER}_*.json")):
                agent.kill()
                killed.set()
                return
            killed.wait(0.005)

    threading.Thread(target=watch, name="kill-when-prepared", daemon=True).start()
    return killed


def test_template_claim_pod_end_to_end(
    api: ApiServerProcess,
    admin: KubeClient,
    make_agent: Callable[..., AgentProcess],
    driver_for: Callable[[AgentProcess], subprocess.Popen[str]],
    control_plane: None,
) -> None:
    agent = dra_agent(make_agent)
    driver_for(agent)
    wait_until(lambda: f"DRA driver {DRIVER} registered" in agent.log(), 30, "the driver registered")
    slice_name = f"{agent.node}-cpu-kubenode-io"
    wait_until(lambda: admin.get(RESOURCE_SLICES, slice_name), 30, "the driver's slice")
    claim_template(admin, f"one-cpu-{agent.node}")

    cdi_dir = agent.dir / "cdi"
    killed = kill_when_prepared(agent, cdi_dir)
    name = f"pinned-{agent.node}"
    body = pod_body(name, agent.node, "grep Cpus_allowed_list /proc/self/status; sleep 600")
    del body["spec"]["nodeName"]  # the scheduler binds it, where the claim's device is
    body["spec"]["resourceClaims"] = [{"name": "cpus", "resourceClaimTemplateName": f"one-cpu-{agent.node}"}]
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "cpus"}]}
    pod = admin.create(PODS, body, "default")
    claim = wait_until(lambda: claim_of(admin, name), 60, "the pod's claim from the template")
    assert killed.wait(90), f"the claim was never prepared:\n{agent.log()[-3000:]}"
    agent.start()

    wait_until(lambda: phase_is(admin, name, "Running"), 90, "the pod Running after the agent's restart")
    assert agent.starts == 2
    assert admin.get(PODS, name, "default")["spec"]["nodeName"] == agent.node
    claim = admin.get(RESOURCE_CLAIMS, claim["metadata"]["name"], "default")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == (DRIVER, agent.node)
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    uid = claim["metadata"]["uid"]
    assert sorted(p.name for p in cdi_dir.glob(f"kubenode-dra_{DRIVER}_*.json")) == [
        f"kubenode-dra_{DRIVER}_{uid}.json"
    ]  # one prepared claim
    cgroups = make_pod_cgroups(agent.root)
    [pid] = wait_until(lambda: leaders(cgroups.pids(pod["metadata"]["uid"])), 30, "the container's process")
    assert cpus_allowed(pid) == result["device"].removeprefix("cpu-")

    admin.delete(PODS, name, "default", grace_period_seconds=0)
    wait_until(lambda: gone(admin, name), 60, "the pod gone")
    wait_until(lambda: not any(cdi_dir.glob("*.json")), 30, "the claim's CDI spec removed")
    wait_until(lambda: claim_gone(admin, claim["metadata"]["name"]), 60, "the template's claim deleted")


def test_a_pod_whose_claim_is_missing_starts_nothing(
    admin: KubeClient,
    make_agent: Callable[..., AgentProcess],
    driver_for: Callable[[AgentProcess], subprocess.Popen[str]],
) -> None:
    agent = dra_agent(make_agent)
    driver_for(agent)
    wait_until(lambda: f"DRA driver {DRIVER} registered" in agent.log(), 30, "the driver registered")
    name = f"claimless-{agent.node}"
    body = pod_body(name, agent.node)
    body["spec"]["resourceClaims"] = [{"name": "cpus", "resourceClaimName": "no-such-claim"}]
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "cpus"}]}
    admin.create(PODS, body, "default")
    [event, *_] = wait_until(
        lambda: events_for(admin, name, "FailedPrepareDynamicResources"), 30, "the event"
    )
    assert "ResourceClaim default/no-such-claim" in event["message"]
    assert not phase_is(admin, name, "Running")
    statuses = (admin.get(PODS, name, "default").get("status") or {}).get("containerStatuses") or []
    assert all("running" not in (c.get("state") or {}) and not c.get("started") for c in statuses), statuses
    admin.delete(PODS, name, "default", grace_period_seconds=0)
    wait_until(lambda: gone(admin, name), 30, "the pod gone")
