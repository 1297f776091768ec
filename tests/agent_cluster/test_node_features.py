"""The node labeller against the real API server, with the agent authenticated as its node: a GFD-style
features file appears, the Node gets its labels, the file changes and the stale labels go while another
writer's stay, the live scheduler places a pod by `nodeSelector: {nvidia.com/gpu.product: ...}`, and the
file's removal takes the labeller's labels (and its annotation) away."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.nodestatus.nodefeatures import OWNED_ANNOTATION
from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import NODES, PODS, KubeClient
from tests.agent_cluster.support import gone, joined_agent, phase_is, pod_body, wait_until
from tests.scheduler_live.support import SchedulerProcess


@pytest.fixture(scope="module")
def features_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("features.d")


@pytest.fixture(scope="module")
def node(api: ApiServerProcess, features_dir: Path) -> Iterator[AgentProcess]:
    yield from joined_agent(api, settings={"nodeFeaturesDir": str(features_dir)})


def write(directory: Path, name: str, text: str) -> None:
    """As GFD writes: a temporary file renamed into place."""
    temporary = directory / f".{name}.tmp"
    temporary.write_text(text)
    os.rename(temporary, directory / name)


def labels(admin: KubeClient, name: str) -> dict[str, str]:
    return dict(admin.get(NODES, name)["metadata"].get("labels") or {})


def test_feature_files_become_labels_that_follow_the_file_and_schedule_a_pod(
    node: AgentProcess, admin: KubeClient, api: ApiServerProcess, features_dir: Path, tmp_path: Path
) -> None:
    wait_until(lambda: labels(admin, node.node).get("kubernetes.io/hostname"), 30, "the Node registered")
    theirs = {"metadata": {"labels": {"example.com/theirs": "kept"}}}
    admin.patch(NODES, node.node, theirs, patch_type="merge")
    write(
        features_dir,
        "gfd",
        "nvidia.com/gpu.product=Fake-GPU-80GB\nnvidia.com/gpu.count=1\nkubernetes.io/hostname=evil\nfake\n",
    )
    wanted = {
        "nvidia.com/gpu.product": "Fake-GPU-80GB",
        "nvidia.com/gpu.count": "1",
        "feature.node.kubernetes.io/fake": "true",  # NFD's prefix; NodeRestriction lets a node write it
    }
    wait_until(lambda: wanted.items() <= labels(admin, node.node).items(), 30, "the features as labels")
    current = admin.get(NODES, node.node)["metadata"]
    assert current["labels"]["kubernetes.io/hostname"] == node.node  # the reserved name was dropped
    assert current["annotations"][OWNED_ANNOTATION] == ",".join(sorted(wanted))
    assert f"{features_dir / 'gfd'}:3: kubernetes.io/hostname: kubernetes.io and k8s.io" in node.log()

    write(features_dir, "gfd", "nvidia.com/gpu.product=Fake-GPU-80GB-v2\n")
    wait_until(
        lambda: (
            labels(admin, node.node).get("nvidia.com/gpu.product") == "Fake-GPU-80GB-v2"
            and "nvidia.com/gpu.count" not in labels(admin, node.node)
        ),
        30,
        "the changed file's labels, the stale ones removed",
    )
    now = labels(admin, node.node)
    assert "feature.node.kubernetes.io/fake" not in now and now["example.com/theirs"] == "kept"

    scheduler = SchedulerProcess(api.kubeconfig, log_path=tmp_path / "scheduler.log")
    try:
        body: dict[str, Any] = pod_body("gpu-selected", "", "sleep 600", grace=2)
        del body["spec"]["nodeName"]
        body["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "Fake-GPU-80GB-v2"}
        admin.create(PODS, body, "default")
        wait_until(lambda: phase_is(admin, "gpu-selected", "Running"), 60, "gpu-selected Running")
        assert admin.get(PODS, "gpu-selected", "default")["spec"]["nodeName"] == node.node
    finally:
        scheduler.stop()
        admin.delete(PODS, "gpu-selected", "default")
        wait_until(lambda: gone(admin, "gpu-selected"), 60, "gpu-selected deleted")

    (features_dir / "gfd").unlink()
    wait_until(
        lambda: "nvidia.com/gpu.product" not in labels(admin, node.node), 30, "the labels gone with the file"
    )
    current = admin.get(NODES, node.node)["metadata"]
    assert OWNED_ANNOTATION not in (current.get("annotations") or {})
    assert current["labels"]["example.com/theirs"] == "kept"
