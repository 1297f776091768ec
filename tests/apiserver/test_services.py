"""core/v1 Services and the always-present default/kubernetes Service (issue 26), with the real kubectl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.apiserver import ApiServerProcess
from tests.apiserver.conftest import python_client
from tests.apiserver.kubectl_support import Kubectl

SERVICES = "/api/v1/namespaces/default/services"


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"ports": [{"port": 80}], **spec}}  # fmt: skip


def test_kubernetes_service_points_at_the_server(api: ApiServerProcess) -> None:
    status, svc = api.request("GET", SERVICES + "/kubernetes")
    assert status == 200
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    assert svc["spec"]["clusterIP"] == "10.96.0.1" and svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": api.port}]


def test_kubectl_cluster_info_and_get_services(api: ApiServerProcess, tmp_path: Path) -> None:
    kubectl = Kubectl(api.kubeconfig, tmp_path / "cache")
    assert f"Kubernetes control plane is running at {api.url}" in kubectl.out("cluster-info")
    kubectl.out("create", "service", "clusterip", "web", "--tcp=80:8080")
    kubectl.out("create", "service", "nodeport", "edge", "--tcp=8080:80", "--node-port=30080")
    lines = kubectl.out("get", "svc").splitlines()
    assert lines[0].split() == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["kubernetes"][1:5] == ["ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    assert rows["web"][1] == "ClusterIP" and rows["web"][4] == "80/TCP"
    assert rows["edge"][1] == "NodePort" and rows["edge"][4] == "8080:30080/TCP"
    wide = kubectl.out("get", "services", "web", "-o", "wide").splitlines()
    assert wide[0].split()[-1] == "SELECTOR" and wide[1].split()[-1] == "app=web"
    assert "service/web" in kubectl.out("get", "all", "-o", "name")
    kubectl.out("run", "exposed", "--image=busybox", "--labels=app=exposed")
    assert "service/exposed exposed" in kubectl.out("expose", "pod", "exposed", "--port=80")
    assert kubectl.out("get", "svc", "exposed", "-o", "jsonpath={.spec.selector.app}") == "exposed"
    kubectl.out("delete", "svc", "web", "edge", "exposed")
    assert kubectl.out("get", "svc", "-o", "name").split() == ["service/kubernetes"]


def test_clusterips_and_nodeports_are_allocated_once(api: ApiServerProcess) -> None:
    status, first = api.request("POST", SERVICES, service("a", type="NodePort"))
    assert status == 201
    ip, node_port = first["spec"]["clusterIP"], first["spec"]["ports"][0]["nodePort"]
    assert ip.startswith("10.") and ip != "10.96.0.1" and 30000 <= node_port <= 32767
    assert first["spec"]["ports"][0]["targetPort"] == 80 and first["spec"]["clusterIPs"] == [ip]
    status, body = api.request("POST", SERVICES, service("b", clusterIP=ip))
    assert status == 422
    assert (
        f'spec.clusterIPs: Invalid value: []string{{"{ip}"}}: failed to allocate IP {ip}: provided IP is '
        in (body["message"])
    )
    taken = service("c", type="NodePort")
    taken["spec"]["ports"][0]["nodePort"] = node_port
    status, body = api.request("POST", SERVICES, taken)
    assert (
        status == 422
        and f"spec.ports[0].nodePort: Invalid value: {node_port}: provided port is already"
        in (body["message"])
    )
    status, body = api.request("POST", SERVICES, service("d", clusterIP="192.168.0.1"))
    assert status == 422 and "The range of valid IPs is 10.96.0.0/12" in body["message"]
    status, body = api.request(
        "PATCH",
        SERVICES + "/a",
        {"spec": {"clusterIP": "10.96.0.9"}},
        content_type="application/merge-patch+json",
    )
    assert status == 422 and "may not change once set" in body["message"]


def test_bad_services_get_kube_messages(api: ApiServerProcess) -> None:
    status, body = api.request("POST", SERVICES, {"metadata": {"name": "noports"}, "spec": {}})
    assert status == 422 and body["message"] == 'Service "noports" is invalid: spec.ports: Required value'
    status, body = api.request("POST", SERVICES, service("odd", type="Weird"))
    assert status == 422 and 'spec.type: Unsupported value: "Weird"' in body["message"]
    bad_port = service("zero")
    bad_port["spec"]["ports"] = [{"port": 0, "protocol": "ICMP"}]
    status, body = api.request("POST", SERVICES, bad_port)
    assert status == 422 and [c["field"] for c in body["details"]["causes"]] == [
        "spec.ports[0].port",
        "spec.ports[0].protocol",
    ]


def test_python_client_and_node_rights(api: ApiServerProcess) -> None:
    from kubernetes import client

    core = client.CoreV1Api(python_client(str(api.kubeconfig)))
    names = [s.metadata.name for s in core.list_service_for_all_namespaces().items if s.metadata]
    assert "kubernetes" in names
    node = client.CoreV1Api(python_client(str(api.kubeconfig_for("system:node:n1", ["system:nodes"]))))
    spec = node.read_namespaced_service("kubernetes", "default").spec
    assert spec is not None and spec.cluster_ip == "10.96.0.1"
    try:
        node.delete_namespaced_service("kubernetes", "default")
    except client.ApiException as exc:
        assert exc.status == 403
    else:
        raise AssertionError("a node deleted the kubernetes Service")


def test_kubernetes_service_follows_the_port_across_restarts(tmp_path: Path) -> None:
    with ApiServerProcess(tmp_path / "data") as api:
        first = api.request("GET", SERVICES + "/kubernetes")[1]
        api.stop()
        api.url = ""  # the next start picks a new free port
        api.start()
        again = api.request("GET", SERVICES + "/kubernetes")[1]
        assert again["metadata"]["uid"] == first["metadata"]["uid"]
        assert again["spec"]["ports"][0]["targetPort"] == api.port
