"""runAsNonRoot against the image's user, as the kubelet's verifyRunAsNonRoot checks it, through the real
kubectl, the API server, the agent and containerd (the fixtures of conftest.py, one set for this module).

Images made here (harness/ociimage.py) with a given User in their config: a name, a uid, none (root).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.containerd import ContainerdProcess
from harness.ociimage import import_image
from kubenode.kubeclient import PODS, KubeClient
from tests.agent_cluster.support import events_for, pod_status, wait_until
from tests.apiserver.kubectl_support import Kubectl
from tests.cri.test_cri_pods import apply, delete, image_pod, running

# The module starts its own API server, agent and containerd: under a load of 90 here that setup alone took
# 98 s of the default 120.
pytestmark = pytest.mark.timeout(300)

NAMED_USER_IMAGE = "docker.io/library/busybox:user-nobody"
UID_IMAGE = "docker.io/library/busybox:user-1000"


def waiting(client: KubeClient, name: str) -> dict[str, Any]:
    statuses = pod_status(client, name).get("containerStatuses") or []
    return dict(statuses[0]["state"].get("waiting") or {}) if statuses else {}


def test_run_as_non_root_is_checked_against_the_images_user(
    agent: AgentProcess,
    admin: KubeClient,
    kubectl: Kubectl,
    containerd: ContainerdProcess,
    tmp_path: Path,
) -> None:
    import_image(containerd.socket, NAMED_USER_IMAGE, user="nobody")
    import_image(containerd.socket, UID_IMAGE, user="1000:1000")
    non_root = {"runAsNonRoot": True}
    named = image_pod(
        "cri-user-named", agent.node, "sleep 600", image=NAMED_USER_IMAGE, securityContext=non_root
    )
    root = image_pod("cri-user-root", agent.node, "sleep 600")  # the busybox image names no user
    root["spec"]["securityContext"] = non_root  # the pod's, merged into the container's
    numeric = image_pod(
        "cri-user-numeric", agent.node, "id -u; sleep 600", image=UID_IMAGE, securityContext=non_root
    )
    for body in (named, root, numeric):
        apply(kubectl, tmp_path, body)

    def config_error(name: str) -> dict[str, Any]:
        state = waiting(admin, name)
        return state if state.get("reason") == "CreateContainerConfigError" else {}

    named_uid = admin.get(PODS, "cri-user-named", "default")["metadata"]["uid"]
    state = wait_until(
        lambda: config_error("cri-user-named"), 60, "cri-user-named CreateContainerConfigError"
    )
    message = (
        "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root "
        f'(pod: "cri-user-named_default({named_uid})", container: main)'
    )
    assert state["message"] == message
    failed = wait_until(lambda: events_for(admin, "cri-user-named", "Failed"), 20, "a Failed event")
    assert f"Error: {message}" in {e["message"] for e in failed}

    root_uid = admin.get(PODS, "cri-user-root", "default")["metadata"]["uid"]
    state = wait_until(lambda: config_error("cri-user-root"), 60, "cri-user-root CreateContainerConfigError")
    assert state["message"] == (
        f'container has runAsNonRoot and image will run as root (pod: "cri-user-root_default({root_uid})", '
        "container: main)"
    )
    # A numeric non-zero user passes, and the container runs as it; the refused pods hurt no one else.
    wait_until(lambda: running(admin, "cri-user-numeric"), 60, "cri-user-numeric Running")
    logs = wait_until(lambda: kubectl.out("logs", "cri-user-numeric"), 20, "the container's output")
    assert logs == "1000\n"
    assert config_error("cri-user-named") and config_error("cri-user-root")
    for name in ("cri-user-named", "cri-user-root", "cri-user-numeric"):
        delete(kubectl, admin, name)
