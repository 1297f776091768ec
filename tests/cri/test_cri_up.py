"""`kubenode up --container-runtime-endpoint` end to end: the real `kubenode up` (tests/up/support.py) pointed
at a real containerd runs a pod with an image that kubectl creates, and after `kubectl delete` nothing of the
pod is left in containerd or in the cgroups (UpProcess fails the test if its cgroup root is not empty at the
end).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.kuberuntime.cri import labels
from agent.kuberuntime.cri.client import CRIClient
from harness.containerd import ContainerdProcess
from harness.crikillcycles import listed
from harness.ociimage import BUSYBOX_IMAGE
from kubenode.kubeclient import PODS
from tests.agent.support import require_cgroup_v1
from tests.agent_cluster.support import gone, pod_status, wait_until
from tests.cri.test_cri_pods import running
from tests.up.support import UpProcess

# `up` starts an API server, a scheduler, an agent and its device plugin: on this shared 2-core machine under
# load that took more than the up tests' 60 s twice; a deadline only bounds a failure.
UP_DEADLINE_S = 240.0
pytestmark = pytest.mark.timeout(480)


def test_up_with_a_runtime_endpoint_runs_an_image_pod_and_leaves_nothing_after_delete(
    containerd: ContainerdProcess, tmp_path: Path
) -> None:
    require_cgroup_v1()
    no_pods = tmp_path / "no-pods"
    no_pods.mkdir()
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "up-image", "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/sh", "-c", "echo hello from up; sleep 600"],
                }
            ],
        },
    }
    manifest = tmp_path / "up-image.json"
    manifest.write_text(json.dumps(body))
    runtime = CRIClient.connect(containerd.endpoint)
    try:
        endpoint = containerd.endpoint
        with UpProcess(no_pods, "--container-runtime-endpoint", endpoint, start_deadline=UP_DEADLINE_S) as up:
            rc, _, err = up.kubectl("apply", "-f", str(manifest))
            assert rc == 0, err

            wait_until(lambda: running(up.client, "up-image"), 90, "up-image Running")
            uid = up.client.get(PODS, "up-image", "default")["metadata"]["uid"]
            sandboxes, containers = listed(runtime, {labels.POD_UID: uid})
            assert len(sandboxes) == 1 and len(containers) == 1
            [shown] = pod_status(up.client, "up-image")["containerStatuses"]
            assert shown["containerID"] == f"containerd://{containers[0].id}"
            logs = wait_until(
                lambda: "hello" in (out := up.kubectl("logs", "up-image")[1]) and out, 20, "logs"
            )
            assert logs == "hello from up\n"

            rc, _, err = up.kubectl("delete", "pod", "up-image", "--wait=false")
            assert rc == 0, err
            wait_until(lambda: gone(up.client, "up-image"), 60, "up-image deleted")
            wait_until(
                lambda: listed(runtime, {labels.POD_UID: uid}) == ([], []), 30, "nothing left in containerd"
            )
    finally:
        runtime.close()
