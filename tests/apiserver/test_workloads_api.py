"""apps/v1 Deployments, ReplicaSets, DaemonSets, batch/v1 Jobs and ServiceAccounts on the real server (no
controllers running): the real kubectl's create (protobuf bodies), apply, get (kube's columns), scale,
set image, explain; the official client's typed APIs and the scale subresource; kube's defaults and
validation messages; and the garbage collector's finalizers that a DELETE's propagationPolicy adds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess
from tests.apiserver.conftest import python_client
from tests.apiserver.kubectl_support import Kubectl

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: %(name)s}
spec:
  replicas: 2
  selector: {matchLabels: {app: %(selector)s}}
  template:
    metadata: {labels: {app: %(labels)s}}
    spec: {containers: [{name: main, image: busybox, command: [sleep, "600"]}]}
"""


def as_json(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl.out(*args, "-o", "json"))


@pytest.fixture(scope="module")
def api(own_api: ApiServerProcess) -> ApiServerProcess:
    return (
        own_api  # not the package's shared server: its ServiceAccount `robot` is named as another module's is
    )


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "cache")


@pytest.fixture(scope="module")
def apps(api: ApiServerProcess) -> Any:
    from kubernetes import client

    return client.AppsV1Api(python_client(str(api.kubeconfig)))


def test_kubectl_create_get_scale_set_image(kubectl: Kubectl) -> None:
    kubectl.out(
        "create", "deployment", "web", "--image=busybox", "--replicas=2", "--port=80", "--", "sleep", "600"
    )
    table = kubectl.out("get", "deploy", "web", "-o", "wide").split("\n")
    assert table[0].split() == [
        "NAME",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]
    assert table[1].split()[:4] == ["web", "0/2", "0", "0"] and table[1].split()[-1] == "app=web"
    spec = as_json(kubectl, "get", "deploy", "web")["spec"]
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
    }
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
    container = spec["template"]["spec"]["containers"][0]
    assert container["command"] == ["sleep", "600"] and container["ports"] == [
        {"containerPort": 80, "protocol": "TCP"}
    ]
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    kubectl.out("scale", "deploy/web", "--replicas=5")
    assert as_json(kubectl, "get", "deploy", "web")["spec"]["replicas"] == 5
    kubectl.out("set", "image", "deploy/web", "busybox=busybox:1.36")
    updated = as_json(kubectl, "get", "deploy", "web")
    assert updated["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"
    assert updated["metadata"]["generation"] == 3  # create, scale, set image: each a spec change
    kubectl.out("delete", "deploy", "web")


def test_job_sa_and_daemonset_columns_and_defaults(kubectl: Kubectl) -> None:
    kubectl.out("create", "job", "once", "--image=busybox", "--", "/bin/sh", "-c", "exit 0")
    job = as_json(kubectl, "get", "job", "once")
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/job-name"] == "once" and labels["controller-uid"] == uid
    assert (job["spec"]["completions"], job["spec"]["parallelism"], job["spec"]["backoffLimit"]) == (1, 1, 6)
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert kubectl.out("get", "job", "once").split("\n")[0].split() == [
        "NAME",
        "STATUS",
        "COMPLETIONS",
        "DURATION",
        "AGE",
    ]
    assert kubectl.out("get", "job", "once").split("\n")[1].split()[:3] == ["once", "Running", "0/1"]
    kubectl.out("create", "serviceaccount", "robot")
    assert kubectl.out("get", "sa", "robot").split("\n")[1].split()[:2] == ["robot", "0"]
    kubectl.run(
        "apply",
        "-f",
        "-",
        stdin="""apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agentd}
spec:
  selector: {matchLabels: {app: agentd}}
  template:
    metadata: {labels: {app: agentd}}
    spec:
      nodeSelector: {disk: ssd}
      containers: [{name: main, image: busybox}]
""",
    )
    lines = kubectl.out("get", "ds", "agentd").split("\n")
    assert lines[0].split()[:7] == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE"]
    assert "disk=ssd" in lines[1]
    strategy = as_json(kubectl, "get", "ds", "agentd")["spec"]["updateStrategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    kubectl.out("delete", "ds", "agentd")
    kubectl.out("delete", "sa", "robot")


STUCK = DEPLOYMENT.replace(
    "replicas: 2", "replicas: 2\n  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 0}}"
)
FOREVER = """apiVersion: batch/v1
kind: Job
metadata: {name: forever}
spec:
  template:
    spec:
      restartPolicy: Always
      containers: [{name: c, image: busybox}]
"""


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            DEPLOYMENT % {"name": "mismatch", "selector": "a", "labels": "b"},
            'The Deployment "mismatch" is invalid: spec.template.metadata.labels: Invalid value: '
            'map[string]string{"app":"b"}: `selector` does not match template `labels`',
        ),
        (
            STUCK % {"name": "stuck", "selector": "a", "labels": "a"},
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
        ),
        (
            FOREVER,
            'spec.template.spec.restartPolicy: Unsupported value: "Always": '
            'supported values: "OnFailure", "Never"',
        ),
    ],
)
def test_validation_messages(kubectl: Kubectl, manifest: str, message: str) -> None:
    result = kubectl.run("apply", "-f", "-", stdin=manifest, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_selector_is_immutable_and_scale_subresource(apps: Any, kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", stdin=DEPLOYMENT % {"name": "fixed", "selector": "a", "labels": "a"})
    changed = DEPLOYMENT % {"name": "fixed", "selector": "b", "labels": "b"}
    result = kubectl.run("apply", "-f", "-", stdin=changed, check=False)
    assert "spec.selector: Invalid value: " in result.stderr and "field is immutable" in result.stderr
    scale = apps.read_namespaced_deployment_scale("fixed", "default")
    assert (scale.spec.replicas, scale.status.selector) == (2, "app=a")
    patched = apps.patch_namespaced_deployment_scale("fixed", "default", {"spec": {"replicas": 7}})
    assert (
        patched.spec.replicas == 7 and apps.read_namespaced_deployment("fixed", "default").spec.replicas == 7
    )
    rs = apps.create_namespaced_replica_set("default", {
        "metadata": {"name": "pair"},
        "spec": {"selector": {"matchLabels": {"app": "pair"}},
                 "template": {"metadata": {"labels": {"app": "pair"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    })  # fmt: skip
    assert rs.spec.replicas == 1 and rs.metadata.generation == 1
    kubectl.out("scale", "rs/pair", "--replicas=3")
    assert kubectl.out("get", "rs", "pair").split("\n")[1].split()[:3] == ["pair", "3", "0"]
    kubectl.out("delete", "deploy", "fixed")
    kubectl.out("delete", "rs", "pair")


def test_delete_propagation_adds_the_collectors_finalizers(api: ApiServerProcess, kubectl: Kubectl) -> None:
    base = "/apis/apps/v1/namespaces/default/replicasets"
    for name, policy, finalizer in (
        ("orph", "Orphan", "orphan"),
        ("fore", "Foreground", "foregroundDeletion"),
    ):
        kubectl.run("apply", "-f", "-", stdin=DEPLOYMENT.replace("Deployment", "ReplicaSet")
                    % {"name": name, "selector": name, "labels": name})  # fmt: skip
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy}
        status, _ = api.request("DELETE", f"{base}/{name}", body)
        assert status == 200
        status, held = api.request("GET", f"{base}/{name}")
        assert held["metadata"]["finalizers"] == [finalizer] and held["metadata"]["deletionTimestamp"]
        # What the garbage collector does once done: the last finalizer removed, the object goes.
        patch = {"metadata": {"finalizers": None}}
        api.request("PATCH", f"{base}/{name}", patch, content_type="application/merge-patch+json")
        assert api.request("GET", f"{base}/{name}")[0] == 404
    # batch/v1 keeps a Job's pods when the client names no policy (the official client's default).
    kubectl.out("create", "job", "keep", "--image=busybox", "--", "true")
    api.request("DELETE", "/apis/batch/v1/namespaces/default/jobs/keep")
    assert api.request("GET", "/apis/batch/v1/namespaces/default/jobs/keep")[1]["metadata"]["finalizers"] == [
        "orphan"
    ]
