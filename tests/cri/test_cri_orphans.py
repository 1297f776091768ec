"""What a restarted agent finds in containerd without a record or a cgroup: sandboxes of pods no one wants
(the agent was killed between RunPodSandbox and its record, or the pod went while it was down) are stopped and
removed at start, as the kubelet's GC removes the sandboxes of pods that no longer exist. Sandboxes another
agent labelled stay. An agent in this process (agent/node.py with the CRI runtime) against a real
containerd."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cm.cgroups import make_pod_cgroups
from agent.composition import compose_node
from agent.config.sources import ManifestSource
from agent.kuberuntime.cri import labels
from agent.kuberuntime.cri.client import CRIClient
from agent.kuberuntime.cri.configs import pod_log_directory, sandbox_config
from harness.containerd import ContainerdProcess
from harness.crikillcycles import listed
from harness.manifests import fast_agent_config, write_manifest
from harness.ociimage import BUSYBOX_IMAGE, SLEEP_FOREVER
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.model.parse import parse_pod
from tests.agent.support import swept_cgroup_root, wait_until

NODE = "testnode"


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    yield from swept_cgroup_root("kn-criorphan")


@pytest.fixture
def client(containerd: ContainerdProcess) -> Iterator[CRIClient]:
    connected = CRIClient.connect(containerd.endpoint)
    yield connected
    connected.close()


def run_sandbox(client: CRIClient, uid: str, node: str, cgroup_parent: str, logs: Path) -> str:
    """A sandbox with the labels the agent puts on its pods' sandboxes, as a killed agent leaves it."""
    pod = parse_pod(
        {
            "metadata": {"name": uid, "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "main"}]},
        }
    )
    config = sandbox_config(pod, node, logs, cgroup_parent, 0)
    return str(
        client.call(client.runtime.RunPodSandbox, cri.RunPodSandboxRequest(config=config)).pod_sandbox_id
    )


def start_container(client: CRIClient, sandbox_id: str, uid: str, node: str, logs: Path) -> str:
    sandbox = client.call(
        client.runtime.PodSandboxStatus, cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id)
    )
    config = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name="main"),
        image=cri.ImageSpec(image=BUSYBOX_IMAGE),
        command=SLEEP_FOREVER,
        log_path="main/0.log",
        labels={labels.POD_UID: uid, labels.CONTAINER_NAME: "main", labels.NODE: node},
    )
    log_directory = pod_log_directory(logs, "default", uid, uid)
    pod_config = cri.PodSandboxConfig(
        metadata=sandbox.status.metadata, log_directory=str(log_directory), labels=sandbox.status.labels
    )
    created = client.call(
        client.runtime.CreateContainer,
        cri.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=config, sandbox_config=pod_config),
    )
    client.call(client.runtime.StartContainer, cri.StartContainerRequest(container_id=created.container_id))
    return str(created.container_id)


def sandboxes_of(client: CRIClient, uid: str) -> list[cri.PodSandbox]:
    return listed(client, {labels.POD_UID: uid})[0]


def running_containers(client: CRIClient, uid: str) -> list[cri.Container]:
    return [c for c in listed(client, {labels.POD_UID: uid})[1] if c.state == cri.CONTAINER_RUNNING]


def test_sandboxes_no_pod_owns_are_removed_at_start_and_others_stay(
    containerd: ContainerdProcess,
    client: CRIClient,
    cgroup_root: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agent.node")
    logs, manifests = tmp_path / "logs", tmp_path / "manifests"
    manifests.mkdir()
    # Outside the agent's pod cgroups: the agent has neither a record nor a cgroup of these pods.
    stray_parent = f"{cgroup_root}/elsewhere"
    running = run_sandbox(client, "stray-running", NODE, stray_parent, logs)
    start_container(client, running, "stray-running", NODE, logs)
    stray_logs = pod_log_directory(logs, "default", "stray-running", "stray-running")
    wait_until(lambda: (stray_logs / "main" / "0.log").exists(), 10, "the stray container's log")
    stopped = run_sandbox(client, "stray-stopped", NODE, stray_parent, logs)
    client.call(client.runtime.StopPodSandbox, cri.StopPodSandboxRequest(pod_sandbox_id=stopped))
    foreign = run_sandbox(client, "another-agents", "othernode", stray_parent, logs)
    write_manifest(
        manifests,
        "kept.yaml",
        f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: kept, uid: kept-uid}}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - {{name: main, image: "{BUSYBOX_IMAGE}", imagePullPolicy: IfNotPresent, command: {SLEEP_FOREVER}}}
        """,
    )
    config = dataclasses.replace(
        fast_agent_config(cgroup_root, manifests, tmp_path / "state"),
        container_runtime_endpoint=containerd.endpoint,
        pod_logs_dir=logs,
    )
    agent = compose_node(config, make_pod_cgroups(cgroup_root), [ManifestSource(manifests, NODE)])
    agent.start()
    try:
        wait_until(lambda: not sandboxes_of(client, "stray-running"), 60, "the running stray sandbox removed")
        wait_until(lambda: not sandboxes_of(client, "stray-stopped"), 30, "the stopped stray sandbox removed")
        wait_until(lambda: len(running_containers(client, "kept-uid")) == 1, 60, "the wanted pod running")
        assert [s.id for s in sandboxes_of(client, "another-agents")] == [foreign]
        assert len(sandboxes_of(client, "kept-uid")) == 1
        assert "stopping orphaned pod stray-running" in caplog.text
        assert not stray_logs.exists()  # its logs went with it
    finally:
        agent.stop(terminate_pods=True)
        client.call(client.runtime.StopPodSandbox, cri.StopPodSandboxRequest(pod_sandbox_id=foreign))
        client.call(client.runtime.RemovePodSandbox, cri.RemovePodSandboxRequest(pod_sandbox_id=foreign))
    assert not sandboxes_of(client, "kept-uid")
