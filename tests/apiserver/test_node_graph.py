"""The Node authorizer's graph with two node identities: each node reads only the ConfigMaps and Secrets that
pods bound to it refer to (volumes, env, envFrom, projected sources, image pull secrets); every other read is
403 with kube's text. Real server, real kubectl per node token, and the graph's reference walk alone."""

from __future__ import annotations

import pytest

from apiserver.auth.nodegraph import pod_references
from harness.apiserver import ApiServerProcess
from tests.apiserver.kubectl_support import Kubectl

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


def test_a_node_watches_one_secret_its_pod_uses(api: ApiServerProcess) -> None:
    """The kubelet's watch-based secret manager: watch?fieldSelector=metadata.name=<secret>."""
    import json
    import urllib.error
    import urllib.request

    assert (
        api.request("POST", f"{NS}/secrets", {"metadata": {"name": "watched"}, "stringData": {"k": "v"}})[0]
        == 201
    )
    volumes = [{"name": "s", "secret": {"secretName": "watched"}}]
    spec = {"nodeName": "w1", "volumes": volumes, "containers": [{"name": "c", "image": "x"}]}
    pod = {"metadata": {"name": "watcher-pod"}, "spec": spec}
    assert api.request("POST", f"{NS}/pods", pod)[0] == 201
    url = f"{api.url}{NS}/secrets?watch=1&fieldSelector=metadata.name%3Dwatched"

    def open_watch(node: str) -> urllib.request.Request:
        token = api.token_for(f"system:node:{node}", ["system:nodes"])
        return urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})

    with urllib.request.urlopen(open_watch("w1"), timeout=30, context=api.ssl_context()) as response:
        first = json.loads(response.readline())
    assert first["type"] == "ADDED" and first["object"]["metadata"]["name"] == "watched"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(open_watch("w2"), timeout=30, context=api.ssl_context())
    assert refused.value.code == 403
    message = json.loads(refused.value.read())["message"]
    assert message == (
        'secrets "watched" is forbidden: User "system:node:w2" cannot watch resource "secrets" '
        'in API group "" '
        "in the namespace \"default\": no relationship found between node 'w2' and this object"
    )


def test_the_graph_rebuilds_when_its_history_is_gone() -> None:
    """A graph that fell behind the watch cache's window starts over from the cached pods."""
    import orjson

    from apiserver.auth.nodegraph import NodeGraph
    from apiserver.storage.cache import Entry, Event, WatchCache

    cache = WatchCache(history_size=2)
    graph = NodeGraph(cache)

    def pod(rev: int, name: str, node: str, secret: str, kind: str = "ADDED") -> None:
        obj = {"metadata": {"name": name, "namespace": "d"}, "spec": {"nodeName": node, "volumes": [
            {"name": "v", "secret": {"secretName": secret}}]}}  # fmt: skip
        entry = Entry("pods", "d", name, rev, orjson.dumps(obj), {}, {"spec.nodeName": node})
        cache.apply(Event(kind, entry, cache.get("pods", "d", name)), 0.0)

    pod(1, "a", "n1", "s1")
    assert graph.has_path("n1", "secrets", "d", "s1") and not graph.has_path("n2", "secrets", "d", "s1")
    pod(2, "a", "n1", "s1", "DELETED")  # caught up from the history: the edge goes with the pod
    pod(3, "a", "n1", "s2")
    assert graph.has_path("n1", "secrets", "d", "s2") and not graph.has_path("n1", "secrets", "d", "s1")
    for rev in range(4, 8):  # more events than the window holds: the graph must rebuild
        pod(rev, f"p{rev}", "n2", f"x{rev}")
    pod(8, "a", "n1", "s2", "DELETED")
    assert not graph.has_path("n1", "secrets", "d", "s2")
    assert all(graph.has_path("n2", "secrets", "d", f"x{rev}") for rev in range(4, 8))
