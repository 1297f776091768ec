"""A CRI pod (busybox image on a real containerd) gets its ServiceAccount credentials as in kube: the
`kube-api-access-*` volume at /var/run/secrets/kubernetes.io/serviceaccount (token, ca.crt, namespace) and
KUBERNETES_SERVICE_HOST/PORT. The image has no HTTPS client, so the pod prints what it sees, and the
official client's `InClusterConfigLoader` (what `load_incluster_config()` runs) is fed exactly that: it
reaches the API server as `system:serviceaccount:default:default` (403 on listing pods, with kube's text);
once the pod is deleted its token is refused (401).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.containerd import ContainerdProcess
from harness.ociimage import BUSYBOX_IMAGE
from kubenode.kubeclient import KubeClient
from tests.agent_cluster.support import gone, wait_until
from tests.apiserver.kubectl_support import Kubectl
from tests.cri.conftest import joined_agent

MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
SCRIPT = (
    "echo host=$KUBERNETES_SERVICE_HOST; echo port=$KUBERNETES_SERVICE_PORT; "
    f"echo ns=$(cat {MOUNT}/namespace); echo token=$(cat {MOUNT}/token); "
    f"echo ---ca; cat {MOUNT}/ca.crt; echo ---end; sleep 600"
)


@pytest.fixture(scope="module")
def agent(api: ApiServerProcess, containerd: ContainerdProcess, logs_dir: Path) -> Iterator[AgentProcess]:
    # What the controller manager would have made: the default ServiceAccount and the root CA.
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    assert api.request("POST", "/api/v1/namespaces/default/serviceaccounts", account)[0] == 201
    root_ca = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt"},
        "data": {"ca.crt": api.ca_file.read_text()},
    }
    assert api.request("POST", "/api/v1/namespaces/default/configmaps", root_ca)[0] == 201
    yield from joined_agent(api, containerd, logs_dir)


def _lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_a_cri_pod_gets_the_in_cluster_config(
    agent: AgentProcess, admin: KubeClient, api: ApiServerProcess, kubectl: Kubectl, tmp_path: Path
) -> None:
    from kubernetes import client
    from kubernetes.config.incluster_config import InClusterConfigLoader

    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "cri-talker", "namespace": "default"},
        "spec": {
            "nodeName": agent.node,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/sh", "-c", SCRIPT],
                }
            ],
        },
    }
    kubectl.run("apply", "-f", "-", stdin=json.dumps(body))
    out = wait_until(
        lambda: "token=" in (text := kubectl.run("logs", "cri-talker", check=False).stdout) and text,
        90,
        f"the pod's output\n{agent.log()}",
    )
    seen = _lines(out)
    host, port = api.url.removeprefix("https://").rsplit(":", 1)
    assert (seen["host"], seen["port"], seen["ns"]) == (host, port, "default")
    ca = out.split("---ca\n", 1)[1].split("---end", 1)[0]
    assert ca == api.ca_file.read_text()
    token = seen["token"].strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == "system:serviceaccount:default:default"
    assert claims["kubernetes.io"]["pod"]["name"] == "cri-talker"
    # The official loader, given what the pod sees (its env, its token file, the CA the volume holds).
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text(ca)
    configuration = client.Configuration()
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(tmp_path / "token"),
        cert_filename=str(tmp_path / "ca.crt"),
        environ={"KUBERNETES_SERVICE_HOST": seen["host"], "KUBERNETES_SERVICE_PORT": seen["port"]},
    )
    loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    with pytest.raises(client.ApiException) as refused:
        client.CoreV1Api(client.ApiClient(configuration)).list_namespaced_pod("default")
    assert refused.value.status == 403
    assert 'User \\"system:serviceaccount:default:default\\" cannot list resource \\"pods\\"' in str(
        refused.value.body
    )
    kubectl.run("delete", "pod", "cri-talker", "--wait=false")
    wait_until(lambda: gone(admin, "cri-talker"), 60, "the pod deleted")
    assert api.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 401
