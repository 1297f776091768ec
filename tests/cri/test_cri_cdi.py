"""CDI names through a runtime that does not apply CDI: Debian's containerd 1.6, a real agent and plugin.

The static device plugin (tests/configs/static-cdi.yaml) answers CDI names; the agent reads the spec this
module writes into a private CDI directory, and the container gets the spec's device node, env and mount
through CRI's plain devices, envs and mounts. A name in no spec is CreateContainerError naming it, and a
spec file that does not parse is named beside it while the good spec's devices keep working.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.kuberuntime.cri.client import CRIClient
from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.containerd import ContainerdProcess
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.kubeclient import NODES, PODS, KubeClient
from tests.agent_cluster.support import pod_status, wait_until
from tests.apiserver.kubectl_support import Kubectl
from tests.cri.conftest import joined_agent
from tests.cri.test_cri_pods import apply, delete, image_pod, of_pod, running

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cdi_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kn-cdi-") as path:
        directory = Path(path)
        (directory / "dongle.txt").write_text("from the CDI mount\n")
        spec = {
            "cdiVersion": "0.6.0",
            "kind": "kubenode.test/dongle",
            "containerEdits": {"env": ["CDI_SPEC=kubenode.test"]},
            "devices": [
                {
                    "name": "d0",
                    "containerEdits": {
                        "env": ["CDI_DONGLE=d0"],
                        "deviceNodes": [{"path": "/dev/cdidongle", "hostPath": "/dev/null"}],
                        "mounts": [
                            {
                                "hostPath": str(directory / "dongle.txt"),
                                "containerPath": "/run/cdidongle",
                                "options": ["ro", "bind"],
                            }
                        ],
                    },
                }
            ],
        }
        (directory / "dongle.json").write_text(json.dumps(spec))
        (directory / "broken.yaml").write_text("cdiVersion: [not closed\n")
        yield directory


@pytest.fixture(scope="module")
def agent(
    api: ApiServerProcess, containerd: ContainerdProcess, logs_dir: Path, cdi_dir: Path
) -> Iterator[AgentProcess]:
    yield from joined_agent(
        api,
        containerd,
        logs_dir,
        plugin=True,
        plugin_config=REPO / "tests/configs/static-cdi.yaml",
        cdiSpecDirs=[str(cdi_dir)],
    )


@pytest.fixture(scope="module")
def runtime(containerd: ContainerdProcess) -> Iterator[CRIClient]:
    client = CRIClient.connect(containerd.endpoint)
    yield client
    client.close()


def wait_for_resource(admin: KubeClient, node: str, resource: str) -> None:
    wait_until(
        lambda: admin.get(NODES, node)["status"]["allocatable"].get(resource) == "1",
        30,
        f"{resource} on the Node",
    )


def test_a_cdi_device_reaches_a_containerd_16_container_through_the_agent(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, runtime: CRIClient, tmp_path: Path
) -> None:
    version = runtime.version()
    assert (version.runtime_name, version.runtime_version.split(".")[:2]) == ("containerd", ["1", "6"])
    wait_for_resource(admin, agent.node, "example.com/cdidongle")
    body = image_pod(
        "cri-cdi",
        agent.node,
        "echo env=$CDI_DONGLE,$CDI_SPEC; stat -c '%F %t:%T' /dev/cdidongle; cat /run/cdidongle; sleep 600",
        resources={"limits": {"example.com/cdidongle": "1"}},
    )
    apply(kubectl, tmp_path, body)
    wait_until(lambda: running(admin, "cri-cdi"), 60, "cri-cdi Running")
    logs = wait_until(
        lambda: "mount" in (out := kubectl.out("logs", "cri-cdi")) and out, 20, "the container's output"
    )
    # /dev/null's numbers (1:3) at the spec's path: the agent passed the node as a CRI device.
    assert logs.splitlines() == ["env=d0,kubenode.test", "character special file 1:3", "from the CDI mount"]
    uid = admin.get(PODS, "cri-cdi", "default")["metadata"]["uid"]
    [container] = of_pod(runtime, uid)[1]
    status = runtime.call(
        runtime.runtime.ContainerStatus, cri.ContainerStatusRequest(container_id=container.id, verbose=True)
    )
    info: dict[str, Any] = json.loads(status.info["info"])
    devices = info["runtimeSpec"]["linux"]["devices"]
    assert [(d["type"], d["major"], d["minor"]) for d in devices if d["path"] == "/dev/cdidongle"] == [
        ("c", 1, 3)
    ]
    delete(kubectl, admin, "cri-cdi")


def test_an_unknown_cdi_name_is_create_container_error_naming_it_and_the_broken_spec(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, runtime: CRIClient, tmp_path: Path
) -> None:
    wait_for_resource(admin, agent.node, "example.com/cdighost")
    limits = {"example.com/cdighost": "1"}
    body = image_pod("cri-ghost", agent.node, "sleep 600", resources={"limits": limits})
    apply(kubectl, tmp_path, body)

    def waiting() -> dict[str, Any] | None:
        statuses = pod_status(admin, "cri-ghost").get("containerStatuses") or []
        state = statuses[0]["state"].get("waiting") if statuses else None
        return state if state and state.get("reason") == "CreateContainerError" else None

    state = wait_until(waiting, 60, "cri-ghost waiting with CreateContainerError")
    assert "kubenode.test/dongle=ghost" in state["message"]
    assert "broken.yaml" in state["message"]  # the spec that did not parse is named too
    uid = admin.get(PODS, "cri-ghost", "default")["metadata"]["uid"]
    assert of_pod(runtime, uid)[1] == []  # nothing was created in containerd
    delete(kubectl, admin, "cri-ghost")
