"""The Node authorizer's graph with two node identities: each node reads only the ConfigMaps and Secrets that
pods bound to it refer to (volumes, env, envFrom, projected sources, image pull secrets); every other read is
403 with kube's text. Real server, real kubectl per node token, and the graph's reference walk alone."""

from __future__ import annotations

import pytest

from apiserver.auth.nodegraph import pod_references
from tests.apiserver.kubectl_support import Kubectl
from tests.apiserver.support import ApiServerProcess

NS = "/api/v1/namespaces/default"
POD_SPEC = {
    "imagePullSecrets": [{"name": "pull"}],
    "volumes": [
        {"name": "v1", "configMap": {"name": "cm-volume"}},
        {"name": "v2", "secret": {"secretName": "secret-volume"}},
        {
            "name": "v3",
            "projected": {
                "sources": [{"configMap": {"name": "cm-projected"}}, {"secret": {"name": "secret-projected"}}]
            },
        },
    ],
    "initContainers": [{"name": "i", "image": "x", "envFrom": [{"configMapRef": {"name": "cm-envfrom"}}]}],
    "containers": [
        {
            "name": "c",
            "image": "x",
            "env": [
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "secret-env", "key": "k"}}},
                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "k"}}},
            ],
            "envFrom": [{"secretRef": {"name": "secret-envfrom"}}],
        }
    ],
}
CONFIGMAPS = ("cm-volume", "cm-projected", "cm-envfrom", "cm-env")
SECRETS = ("pull", "secret-volume", "secret-projected", "secret-env", "secret-envfrom")


def test_pod_references_cover_kubes_visitors() -> None:
    refs = pod_references({"metadata": {"namespace": "ns"}, "spec": POD_SPEC})
    assert refs == {("configmaps", "ns", n) for n in CONFIGMAPS} | {("secrets", "ns", n) for n in SECRETS}


def forbidden(node: str, resource: str, name: str) -> str:
    return (
        f'{resource} "{name}" is forbidden: User "system:node:{node}" cannot get resource "{resource}" '
        f'in API group "" in the namespace "default": '
        f"no relationship found between node '{node}' and this object"
    )


@pytest.fixture(scope="module")
def nodes(api: ApiServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Kubectl]:
    cache = tmp_path_factory.mktemp("cache")
    return {
        n: Kubectl(api.kubeconfig_for(f"system:node:{n}", ["system:nodes"]), cache / n) for n in ("n1", "n2")
    }


def test_two_nodes_read_only_what_their_pods_use(api: ApiServerProcess, nodes: dict[str, Kubectl]) -> None:
    for name in (*CONFIGMAPS, "unrelated-cm"):
        assert (
            api.request("POST", f"{NS}/configmaps", {"metadata": {"name": name}, "data": {"k": "v"}})[0]
            == 201
        )
    for name in (*SECRETS, "unrelated-secret"):
        assert (
            api.request("POST", f"{NS}/secrets", {"metadata": {"name": name}, "stringData": {"k": "v"}})[0]
            == 201
        )
    pod = {"metadata": {"name": "uses-all"}, "spec": {**POD_SPEC, "nodeName": "n1"}}
    assert api.request("POST", f"{NS}/pods", pod)[0] == 201

    n1, n2 = nodes["n1"], nodes["n2"]
    for name in CONFIGMAPS:
        assert n1.out("get", "configmap", name, "-o", "name") == f"configmap/{name}\n"
        denied = n2.run("get", "configmap", name, check=False)
        assert denied.returncode != 0 and forbidden("n2", "configmaps", name) in denied.stderr
    for name in SECRETS:
        assert n1.out("get", "secret", name, "-o", "jsonpath={.data.k}") == "dg=="
        denied = n2.run("get", "secret", name, check=False)
        assert forbidden("n2", "secrets", name) in denied.stderr
    assert (
        forbidden("n1", "secrets", "unrelated-secret")
        in n1.run("get", "secret", "unrelated-secret", check=False).stderr
    )
    assert (
        forbidden("n1", "configmaps", "unrelated-cm")
        in n1.run("get", "cm", "unrelated-cm", check=False).stderr
    )

    # A list or watch must name its one object (kubelets watch with fieldSelector=metadata.name=...).
    status, body = api.request(
        "GET",
        f"{NS}/secrets?fieldSelector=metadata.name%3Dsecret-env",
        token=api.token_for("system:node:n1", ["system:nodes"]),
    )
    assert status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["secret-env"]
    listed = n1.run("get", "secrets", check=False)
    assert (
        'User "system:node:n1" cannot list resource "secrets"' in listed.stderr
        and "No Object name found" in listed.stderr
    )
    written = n1.run("delete", "secret", "secret-env", check=False)
    assert "can only read resources of this type" in written.stderr

    # Deleting the pod takes the edges with it; binding another pod to n2 gives n2 its references.
    assert api.request("DELETE", f"{NS}/pods/uses-all?gracePeriodSeconds=0")[0] == 200
    assert (
        forbidden("n1", "secrets", "secret-env") in n1.run("get", "secret", "secret-env", check=False).stderr
    )
    moved = {"metadata": {"name": "moved"}, "spec": {"containers": [{"name": "c", "image": "x", "env": [
        {"name": "A", "valueFrom": {"secretKeyRef": {"name": "secret-env", "key": "k"}}}]}]}}  # fmt: skip
    assert api.request("POST", f"{NS}/pods", moved)[0] == 201
    assert (
        "no relationship" in n2.run("get", "secret", "secret-env", check=False).stderr
    )  # unbound: no edge yet
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "moved"},
        "target": {"kind": "Node", "name": "n2"},
    }
    assert api.request("POST", f"{NS}/pods/moved/binding", binding)[0] == 201
    assert n2.out("get", "secret", "secret-env", "-o", "name") == "secret/secret-env\n"
    assert "no relationship" in n1.run("get", "secret", "secret-env", check=False).stderr


def test_nodes_read_runtimeclasses(nodes: dict[str, Kubectl]) -> None:
    assert nodes["n1"].run("get", "runtimeclasses").returncode == 0
