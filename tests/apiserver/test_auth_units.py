"""Token file, authenticator reload, the Node,RBAC authorizer's decisions and messages, NodeRestriction."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver.auth import MASTERS_GROUP, NODES_GROUP, UserInfo
from apiserver.auth.authn import TokenAuthenticator
from apiserver.auth.authz import new_authorizer
from apiserver.auth.kubeconfig import kubeconfig_document, write_kubeconfig
from apiserver.auth.noderestriction import admit
from apiserver.auth.pki import ensure_serving_cert, is_loopback, machine_names
from apiserver.auth.tokens import ensure_token_file, issue_token, parse_token_file, token_for
from apiserver.request import RequestInfo, request_info

ADMIN = UserInfo("admin", "1", (MASTERS_GROUP, "system:authenticated"))
SCHEDULER = UserInfo("system:kube-scheduler", "2", ("system:authenticated",))
NODE_A = UserInfo("system:node:a", "3", (NODES_GROUP, "system:authenticated"))
BOB = UserInfo("bob", "4", ("system:authenticated",))


def info(method: str, path: str, **query: str) -> RequestInfo:
    return request_info(method, path, query)


def test_token_file_has_the_bootstrap_users_in_kube_csv(tmp_path: Path) -> None:
    path = ensure_token_file(tmp_path, node_name="n1")
    entries = {e.user: e for e in parse_token_file(path.read_text())}
    assert entries["admin"].groups == (MASTERS_GROUP,)
    assert "system:kube-scheduler" in entries
    assert entries["system:node:n1"].groups == (NODES_GROUP,)
    assert path.stat().st_mode & 0o777 == 0o600
    assert ensure_token_file(tmp_path) == path and token_for(path, "admin") == entries["admin"].token


def test_issued_token_is_accepted_without_restart(tmp_path: Path) -> None:
    path = ensure_token_file(tmp_path, node_name="n1")
    authn = TokenAuthenticator(path, recheck_seconds=0.0)
    assert authn.authenticate(None) is None
    assert authn.authenticate("Bearer nope") is None
    assert authn.authenticate("Basic " + (token_for(path, "admin") or "")) is None
    admin = authn.authenticate("Bearer " + (token_for(path, "admin") or ""))
    assert admin is not None and MASTERS_GROUP in admin.groups and "system:authenticated" in admin.groups
    token = issue_token(path, "bob", ["dev", "ops"])
    assert issue_token(path, "bob", ["dev"]) == token  # existing user keeps its token
    deadline = time.monotonic() + 5
    user = authn.authenticate(f"Bearer {token}")
    while user is None and time.monotonic() < deadline:  # mtime granularity: poll until the stamp differs
        time.sleep(0.02)
        user = authn.authenticate(f"Bearer {token}")
    assert user is not None and user.name == "bob" and user.groups[:2] == ("dev", "ops")


def test_a_malformed_token_file_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.csv"
    bad.write_text("tok,alice,1\nonlyone\n")
    with pytest.raises(ValueError, match=r"t\.csv: line 2"):
        TokenAuthenticator.from_file(bad)


def test_masters_may_do_anything_others_get_kubes_message() -> None:
    authz = new_authorizer("Node,RBAC")
    assert authz.authorize(ADMIN, info("DELETE", "/api/v1/nodes/x")).allowed
    denied = authz.authorize(BOB, info("GET", "/api/v1/namespaces/default/pods"))
    assert not denied.allowed
    assert denied.message == (
        'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default"'
    )
    cluster = authz.authorize(BOB, info("DELETE", "/api/v1/nodes/n1"))
    assert cluster.message == (
        'nodes "n1" is forbidden: User "bob" cannot delete resource "nodes" in API group "" '
        "at the cluster scope"
    )
    lease = authz.authorize(BOB, info("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l"))
    assert lease.message.startswith('leases.coordination.k8s.io "l" is forbidden: User "bob" cannot get')
    assert authz.authorize(BOB, info("GET", "/apis")).allowed  # discovery is open to everyone authenticated
    assert authz.authorize(BOB, info("GET", "/openapi/v3/api/v1")).allowed
    assert not authz.authorize(BOB, info("GET", "/metrics")).allowed
    assert new_authorizer("AlwaysAllow").authorize(BOB, info("DELETE", "/api/v1/nodes/n")).allowed
    with pytest.raises(ValueError, match="authorization-mode"):
        new_authorizer("ABAC")


def test_scheduler_gets_the_bootstrap_role() -> None:
    authz = new_authorizer("Node,RBAC")
    allowed = [
        ("GET", "/api/v1/nodes", {"watch": "1"}),
        ("GET", "/api/v1/pods", {}),
        ("POST", "/api/v1/namespaces/d/pods/p/binding", {}),
        ("PATCH", "/api/v1/namespaces/d/pods/p/status", {}),
        ("DELETE", "/api/v1/namespaces/d/pods/p", {}),
        ("POST", "/api/v1/namespaces/d/events", {}),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler", {}),
    ]
    for method, path, query in allowed:
        assert authz.authorize(SCHEDULER, info(method, path, **query)).allowed, (method, path)
    for method, path in [
        ("POST", "/api/v1/namespaces/d/pods"),
        ("PATCH", "/api/v1/nodes/n"),
        ("PUT", "/api/v1/namespaces/d/pods/p"),
    ]:
        assert not authz.authorize(SCHEDULER, info(method, path)).allowed, (method, path)


def test_node_authorizer_rules() -> None:
    authz = new_authorizer("Node,RBAC")
    for method, path in [
        ("GET", "/api/v1/pods"),
        ("PATCH", "/api/v1/nodes/a/status"),
        ("POST", "/api/v1/nodes"),
        ("PATCH", "/api/v1/namespaces/d/pods/p/status"),
        ("POST", "/api/v1/namespaces/d/events"),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/a"),
    ]:
        assert authz.authorize(NODE_A, info(method, path)).allowed, (method, path)
    update = authz.authorize(NODE_A, info("PUT", "/api/v1/namespaces/default/pods/x"))
    assert update.message == (
        'pods "x" is forbidden: User "system:node:a" cannot update resource "pods" in API group "" '
        'in the namespace "default"'
    )
    other_lease = authz.authorize(
        NODE_A, info("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/b")
    )
    assert not other_lease.allowed and "same name as the requesting node" in other_lease.message


def _pod(node: str = "a", mirror: bool = False, **spec: Any) -> dict[str, Any]:
    annotations = {"kubernetes.io/config.mirror": "h"} if mirror else {}
    owners = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": "u", "controller": True}]
    meta = {"name": "p", "annotations": annotations, "ownerReferences": owners}
    return {"metadata": meta, "spec": {"nodeName": node, **spec}}


def test_node_restriction() -> None:
    create = info("POST", "/api/v1/namespaces/d/pods")
    assert admit(NODE_A, create, None, _pod(mirror=True)) is None
    assert admit(NODE_A, create, None, _pod()) == (
        'pods "p" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, '
        'node "a" can only create mirror pods'
    )
    assert "spec.nodeName set to itself" in (admit(NODE_A, create, None, _pod("b", mirror=True)) or "")
    orphan = _pod(mirror=True)
    orphan["metadata"]["ownerReferences"] = []
    assert admit(NODE_A, create, None, orphan) == (
        'pods "p" is forbidden: node "a" can only create pods with an owner reference set to itself'
    )
    secret_volume = _pod(mirror=True, volumes=[{"name": "s", "secret": {"secretName": "x"}}])
    assert admit(NODE_A, create, None, secret_volume) == (
        'pods "p" is forbidden: node "a" can not create pods that reference secrets'
    )
    env = [{"name": "c", "env": [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}]}]
    assert admit(NODE_A, create, None, _pod(mirror=True, containers=env)) is not None
    status = info("PATCH", "/api/v1/namespaces/d/pods/p/status")
    assert admit(NODE_A, status, _pod(), _pod()) is None
    assert admit(NODE_A, status, _pod("b"), _pod("b")) == (
        'pods "p" is forbidden: node "a" can only update pod status for pods with spec.nodeName set to itself'
    )
    delete = info("DELETE", "/api/v1/namespaces/d/pods/p")
    assert admit(NODE_A, delete, _pod(), None) is None  # kubelet finishes deletion of its own pods
    assert admit(NODE_A, delete, _pod("b"), None) is not None
    node_b = info("PATCH", "/api/v1/nodes/b/status")
    assert admit(NODE_A, node_b, {"metadata": {"name": "b"}}, {"metadata": {"name": "b"}}) == (
        'nodes "b" is forbidden: node "a" is not allowed to modify node "b"'
    )
    own = info("PATCH", "/api/v1/nodes/a")
    tainted = {"metadata": {"name": "a"}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    assert admit(NODE_A, own, {"metadata": {"name": "a"}}, tainted) == (
        'nodes "a" is forbidden: node "a" is not allowed to modify taints'
    )
    assert admit(NODE_A, info("DELETE", "/api/v1/nodes/a"), {"metadata": {"name": "a"}}, None) is not None
    register = info("POST", "/api/v1/nodes")
    allowed = {
        "kubernetes.io/hostname": "a",
        "topology.kubernetes.io/zone": "z",
        "node.kubernetes.io/x": "1",
        "team": "a",
    }
    assert admit(NODE_A, register, None, {"metadata": {"name": "a", "labels": allowed}}) is None
    role = {"metadata": {"name": "a", "labels": {"node-role.kubernetes.io/worker": ""}}}
    assert admit(NODE_A, register, None, role) == (
        'nodes "a" is forbidden: node "a" is not allowed to set the following labels: '
        "node-role.kubernetes.io/worker"
    )
    assert admit(NODE_A, own, {"metadata": {"name": "a"}}, role) == (
        'nodes "a" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker'
    )
    assert (
        admit(NODE_A, own, {"metadata": {"name": "a"}}, {"metadata": {"name": "a", "labels": {"team": "b"}}})
        is None
    )
    assert admit(ADMIN, delete, _pod("b"), None) is None


def test_pki_and_kubeconfig(tmp_path: Path) -> None:
    from cryptography import x509

    cert = ensure_serving_cert(tmp_path, ["10.1.2.3", "node.example"])
    san = x509.load_pem_x509_certificate(cert.cert_path.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    names = {str(v) for v in san.value.get_values_for_type(x509.IPAddress)}
    assert {"10.1.2.3", "127.0.0.1"} <= names and "node.example" in san.value.get_values_for_type(
        x509.DNSName
    )
    ca_before = cert.ca_path.read_bytes()
    again = ensure_serving_cert(tmp_path, ["10.9.9.9"])  # new host: new serving cert from the same CA
    assert again.ca_path.read_bytes() == ca_before
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")
    wildcard = ensure_serving_cert(tmp_path / "any", ["0.0.0.0"])  # every address of this machine
    wild_san = x509.load_pem_x509_certificate(
        wildcard.cert_path.read_bytes()
    ).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    ips = {str(v) for v in wild_san.value.get_values_for_type(x509.IPAddress)}
    assert ips >= {a.split("%")[0] for a in machine_names() if ":" not in a and "." in a}
    assert socket.gethostname() in wild_san.value.get_values_for_type(x509.DNSName)
    other = {"apiVersion": "v1", "kind": "Config", "current-context": "prod",
             "clusters": [{"name": "prod", "cluster": {"server": "https://prod"}},
                          {"name": "kubenode", "cluster": {"server": "https://stale"}}],
             "users": [{"name": "me", "user": {"token": "x"}}],
             "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "me"}}]}  # fmt: skip
    home = tmp_path / "config"
    home.write_text(yaml.safe_dump(other))
    write_kubeconfig(home, "https://127.0.0.1:6443", "tok", cert.ca_pem)
    both = yaml.safe_load(home.read_text())
    assert [c["name"] for c in both["clusters"]] == [
        "prod",
        "kubenode",
    ]  # the stale entry replaced, prod kept
    assert both["clusters"][1]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert [u["name"] for u in both["users"]] == ["me", "admin"]
    assert both["current-context"] == "admin@kubenode" and len(both["contexts"]) == 2
    doc = kubeconfig_document("https://10.1.2.3:6443", "tok", cert.ca_pem)
    assert doc["clusters"][0]["cluster"]["certificate-authority-data"]
    assert doc["users"][0]["user"] == {"token": "tok"}


def test_node_resource_topology_access() -> None:
    authz = new_authorizer("Node,RBAC")
    nrt = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
    assert authz.authorize(SCHEDULER, info("GET", nrt, watch="1")).allowed
    assert not authz.authorize(SCHEDULER, info("PUT", f"{nrt}/a")).allowed
    for method, path in [("GET", nrt), ("POST", nrt), ("PUT", f"{nrt}/a"), ("GET", f"{nrt}/b")]:
        assert authz.authorize(NODE_A, info(method, path)).allowed, (method, path)
    other = authz.authorize(NODE_A, info("PUT", f"{nrt}/b"))
    assert not other.allowed and "NodeResourceTopology of its own node" in other.message
    # A create names the object in its body: NodeRestriction holds the node to its own name.
    create = info("POST", nrt)
    assert admit(NODE_A, create, None, {"metadata": {"name": "a"}}) is None
    assert admit(NODE_A, create, None, {"metadata": {"name": "b"}}) == (
        'noderesourcetopologies.topology.node.k8s.io "b" is forbidden: '
        'node "a" can only write the NodeResourceTopology named after itself'
    )
