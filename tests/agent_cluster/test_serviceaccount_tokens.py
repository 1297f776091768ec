"""A process pod talks to the API as its ServiceAccount, end to end: `kubenode apiserver`, `kubenode
controller-manager` (the `default` ServiceAccount, `kube-root-ca.crt`) and the agent as its
node, all real processes.

A pod created with no volumes gets the `kube-api-access-*` projected volume and the env from the API
server's admission and the agent; inside it, the official client's `load_incluster_config()` reaches the
API server, which says `system:serviceaccount:default:default` may not list pods (403, so it knows who
asks); a RoleBinding made with `kubectl create rolebinding` then lets it. Once the pod is deleted, its
token is refused (401). A second pod with `automountServiceAccountToken: false` has neither volume nor token.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.controllermanager import ControllerManagerProcess
from kubenode.kubeclient import KubeClient, load_kubeconfig
from kubenode.kubeclient.client import PODS
from tests.agent.support import require_cgroup_v1
from tests.agent_cluster.support import events_for, gone, phase_is, wait_until
from tests.apiserver.kubectl_support import Kubectl
from tests.apiserver.test_serviceaccount_tokens import grant_pod_reads

SETTINGS = {"configMapAndSecretTtl": 0.5, "resyncInterval": 1.0}
MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# What runs in the pod: the official client, configured from inside the pod only.
IN_POD = f"""
import os, time
from kubernetes import client, config
config.load_incluster_config()
print("env", os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"], flush=True)
print("namespace", open("{MOUNT}/namespace").read(), flush=True)
review = client.AuthenticationV1Api().create_self_subject_review(client.V1SelfSubjectReview())
print("whoami", review.status.user_info.username, flush=True)
last = None
while True:
    try:
        client.CoreV1Api().list_namespaced_pod("default")
        code, message = 200, ""
    except client.ApiException as exc:
        code, message = exc.status, exc.body
    if code != last:
        print("list pods", code, message, flush=True)
        last = code
    time.sleep(0.2)
"""


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServerProcess]:
    """This module's own server, with the controller manager beside it."""
    require_cgroup_v1()
    with (
        ApiServerProcess() as server,
        ControllerManagerProcess(server.data_dir / "controller-manager.kubeconfig"),
    ):
        yield server


@pytest.fixture(scope="module")
def admin(api: ApiServerProcess) -> Iterator[KubeClient]:
    client = KubeClient(load_kubeconfig(api.kubeconfig))
    yield client
    client.close()


@pytest.fixture
def node(make_agent: Callable[..., AgentProcess]) -> AgentProcess:
    return make_agent(settings=SETTINGS).start()


def _pod(name: str, node: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": command}],
            **spec,
        },
    }


def _logs(node: AgentProcess, name: str) -> str:
    logs = sorted((node.state / "logs").glob(f"default_{name}_*/main/*.log"))
    return logs[-1].read_text() if logs else ""


def _ready_to_admit(api: ApiServerProcess) -> bool:
    """The controller manager has made `default` and published the CA (pods made before get no token)."""
    account = api.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
    return account and api.request("GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt")[0] == 200


def test_a_pod_reaches_the_api_as_its_service_account(
    api: ApiServerProcess, admin: KubeClient, node: AgentProcess, tmp_path: Path
) -> None:
    wait_until(lambda: _ready_to_admit(api), 30, "the default ServiceAccount and kube-root-ca.crt")
    name = f"talker-{uuid.uuid4().hex[:6]}"
    created = admin.create(PODS, _pod(name, node.node, [sys.executable, "-c", IN_POD]), "default")
    (volume,) = created["spec"]["volumes"]
    assert volume["name"].startswith("kube-api-access-")
    assert {"name": volume["name"], "readOnly": True, "mountPath": MOUNT} in created["spec"]["containers"][0][
        "volumeMounts"
    ]
    wait_until(lambda: phase_is(admin, name, "Running"), 60, f"the pod Running\n{node.log()}")
    log = wait_until(lambda: "list pods" in _logs(node, name) and _logs(node, name), 30, "the pod's output")
    host, port = api.url.removeprefix("https://").rsplit(":", 1)
    assert f"env {host} {port}" in log
    assert "namespace default" in log
    assert "whoami system:serviceaccount:default:default" in log
    assert "list pods 403" in log
    assert 'User \\"system:serviceaccount:default:default\\" cannot list resource \\"pods\\"' in log

    grant_pod_reads(Kubectl(api.kubeconfig, tmp_path / "cache"), "default")
    wait_until(lambda: "list pods 200" in _logs(node, name), 30, "the RoleBinding applied inside the pod")

    (token_file,) = (node.state / "pods" / created["metadata"]["uid"]).glob(
        "volumes/kubernetes.io~projected/kube-api-access-*/token"
    )
    token = token_file.read_text()
    claims = json.loads(_b64(token.split(".")[1]))
    assert claims["kubernetes.io"]["pod"] == {"name": name, "uid": created["metadata"]["uid"]}
    assert claims["kubernetes.io"]["node"]["name"] == node.node
    assert claims["exp"] - claims["iat"] == 3607
    assert api.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 200

    admin.delete(PODS, name, "default", grace_period_seconds=0)
    wait_until(lambda: gone(admin, name), 30, "the pod gone")
    assert api.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 401
    wait_until(lambda: not token_file.exists(), 30, "the token removed from the node")


def test_automount_false_gets_neither_volume_nor_token(
    api: ApiServerProcess, admin: KubeClient, node: AgentProcess
) -> None:
    wait_until(lambda: _ready_to_admit(api), 30, "the default ServiceAccount and kube-root-ca.crt")
    name = f"quiet-{uuid.uuid4().hex[:6]}"
    script = f"ls {MOUNT} 2>&1; echo host=$KUBERNETES_SERVICE_HOST; sleep 600"
    body = _pod(name, node.node, ["sh", "-c", script], automountServiceAccountToken=False)
    created = admin.create(PODS, body, "default")
    assert not created["spec"].get("volumes")
    assert not created["spec"]["containers"][0].get("volumeMounts")
    wait_until(lambda: phase_is(admin, name, "Running"), 60, "the pod Running")
    log = wait_until(lambda: "host=" in _logs(node, name) and _logs(node, name), 30, "the pod's output")
    assert "No such file or directory" in log and "host=127.0.0.1" in log
    assert not list((node.state / "pods" / created["metadata"]["uid"]).glob("volumes/*/*/token"))
    admin.delete(PODS, name, "default", grace_period_seconds=0)


def _b64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_a_refused_token_request_is_a_failed_mount_retried_until_it_works(
    api: ApiServerProcess, admin: KubeClient, node: AgentProcess
) -> None:
    account = f"robot-{uuid.uuid4().hex[:6]}"
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}
    assert api.request("POST", "/api/v1/namespaces/default/serviceaccounts", sa)[0] == 201
    name = f"robot-pod-{uuid.uuid4().hex[:6]}"
    # Admitted while the account exists; deleted before the agent asks for the pod's token.
    body = _pod(name, "", ["sh", "-c", f"cat {MOUNT}/token >/dev/null && echo has-token; sleep 600"])
    del body["spec"]["nodeName"]
    body["spec"]["serviceAccountName"] = account
    admin.create(PODS, body, "default")
    assert api.request("DELETE", f"/api/v1/namespaces/default/serviceaccounts/{account}")[0] == 200
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"name": node.node},
    }
    assert api.request("POST", f"/api/v1/namespaces/default/pods/{name}/binding", binding)[0] == 201

    def failed_mount() -> list[dict[str, Any]]:
        return [e for e in events_for(admin, name, "FailedMount") if "failed to fetch token" in e["message"]]

    (event, *_) = wait_until(failed_mount, 30, f"a FailedMount event\n{node.log()}")
    assert event["message"].startswith('MountVolume.SetUp failed for volume "kube-api-access-')
    assert event["message"].endswith(f': failed to fetch token: serviceaccounts "{account}" not found')
    assert api.request("POST", "/api/v1/namespaces/default/serviceaccounts", sa)[0] == 201
    wait_until(lambda: phase_is(admin, name, "Running"), 60, "the pod Running once the account is back")
    wait_until(lambda: "has-token" in _logs(node, name), 30, "the token in the pod")
    admin.delete(PODS, name, "default", grace_period_seconds=0)
