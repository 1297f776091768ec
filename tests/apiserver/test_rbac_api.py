"""rbac.authorization.k8s.io/v1 on the real server, through the real kubectl: `kubectl apply -f deploy/`
and `delete -f deploy/` for every document, kubectl's Tables, kube's validation, a RoleBinding created
through the API that lets a ServiceAccount in (and `auth can-i` / SubjectAccessReview that say so), and
kube's escalate/bind rule for a user who may write RBAC objects."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess
from tests.apiserver.kubectl_support import Kubectl

ROOT = Path(__file__).resolve().parents[2]
RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "cache")


def wait_for(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.05)


def test_kubectl_apply_and_delete_deploy(kubectl: Kubectl) -> None:
    applied = kubectl.out("apply", "-f", str(ROOT / "deploy"))
    for line in (
        "clusterrole.rbac.authorization.k8s.io/kubenode-scheduler created",
        "clusterrolebinding.rbac.authorization.k8s.io/kubenode-scheduler created",
        "role.rbac.authorization.k8s.io/kubenode-scheduler-leader-election created",
        "rolebinding.rbac.authorization.k8s.io/kubenode-scheduler-leader-election created",
        "daemonset.apps/kubenode-agent created",
        "deployment.apps/kubenode-scheduler created",
    ):
        assert line in applied
    again = kubectl.out("apply", "-f", str(ROOT / "deploy"))
    assert "clusterrole.rbac.authorization.k8s.io/kubenode-scheduler unchanged" in again
    assert "created" not in again and "configured" not in again
    wide = kubectl.out("get", "clusterrolebinding", "kubenode-scheduler", "-o", "wide").splitlines()
    assert wide[0].split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert wide[1].split()[:2] == ["kubenode-scheduler", "ClusterRole/kubenode-scheduler"]
    assert wide[1].split()[-1] == "kube-system/kubenode-scheduler"
    roles = kubectl.out("get", "roles", "-n", "kube-system").splitlines()
    assert roles[0].split() == ["NAME", "CREATED", "AT"]
    # beside kube's bootstrap Roles of kube-system (extension-apiserver-authentication-reader, ...)
    assert "kubenode-scheduler-leader-election" in [line.split()[0] for line in roles[1:]]
    server_side = kubectl.out("apply", "--server-side", "-f", str(ROOT / "deploy" / "scheduler.yaml"))
    assert "clusterrolebinding.rbac.authorization.k8s.io/kubenode-scheduler serverside-applied" in server_side
    deleted = kubectl.out("delete", "-f", str(ROOT / "deploy"))  # waits on a watch of each object
    assert 'clusterrolebinding.rbac.authorization.k8s.io "kubenode-scheduler" deleted' in deleted
    left = kubectl.out("get", "roles", "-n", "kube-system")
    assert "kubenode-scheduler-leader-election" not in left
    assert "system::leader-locking-kube-scheduler" in left


def test_discovery_names_the_four_kinds(kubectl: Kubectl) -> None:
    lines = kubectl.out("api-resources", "--api-group=rbac.authorization.k8s.io").splitlines()
    names = sorted(line.split()[0] for line in lines[1:])
    assert names == ["clusterrolebindings", "clusterroles", "rolebindings", "roles"]
    assert "Role" in kubectl.out("explain", "role.rules")


def _binding(roleref_kind: str = "ClusterRole", subject_kind: str = "User") -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": roleref_kind, "name": "view"},
        "subjects": [{"kind": subject_kind, "name": "someone"}],
    }


def test_validation_is_kubes(api: ApiServerProcess) -> None:
    status, answer = api.request("POST", f"{RBAC}/namespaces/default/rolebindings", _binding("Pod"))
    assert status == 422
    assert (
        'roleRef.kind: Unsupported value: "Pod": supported values: "Role", "ClusterRole"' in answer["message"]
    )
    status, answer = api.request(
        "POST", f"{RBAC}/namespaces/default/rolebindings", _binding(subject_kind="Robot")
    )
    assert status == 422
    assert 'subjects[0].kind: Unsupported value: "Robot"' in answer["message"]
    status, answer = api.request("POST", f"{RBAC}/namespaces/default/rolebindings", _binding())
    assert status == 201, answer
    assert answer["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"  # v1 defaulting
    patch = {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}}
    status, answer = api.request(
        "PATCH",
        f"{RBAC}/namespaces/default/rolebindings/b",
        patch,
        content_type="application/merge-patch+json",
    )
    assert status == 422 and "roleRef: Invalid value" in answer["message"]
    assert "cannot change roleRef" in answer["message"]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "system:odd"},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, {"apiGroups": [""], "verbs": ["get"]}],
    }
    status, answer = api.request("POST", f"{RBAC}/namespaces/default/roles", role)
    assert status == 422
    assert (
        "rules[0].nonResourceURLs" in answer["message"]
        and "namespaced rules cannot apply" in answer["message"]
    )
    assert "rules[1].resources: Required value" in answer["message"]
    role["rules"] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    assert api.request("POST", f"{RBAC}/namespaces/default/roles", role)[0] == 201  # a colon is fine


def _account_token(api: ApiServerProcess, name: str) -> str:
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
    assert api.request("POST", "/api/v1/namespaces/default/serviceaccounts", body)[0] == 201
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    status, answer = api.request("POST", f"/api/v1/namespaces/default/serviceaccounts/{name}/token", request)
    assert status == 201, answer
    token: str = answer["status"]["token"]
    return token


def _can_i(api: ApiServerProcess, token: str, verb: str, resource: str, namespace: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace}},
    }
    status, answer = api.request(
        "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, token=token
    )
    assert status == 201, answer
    return bool(answer["status"]["allowed"])


def test_kubectl_create_rolebinding_lets_a_service_account_list_pods(
    api: ApiServerProcess, kubectl: Kubectl
) -> None:
    token = _account_token(api, "reader")
    assert api.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 403
    assert not _can_i(api, token, "list", "pods", "default")
    kubectl.out("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods")
    kubectl.out(
        "create", "rolebinding", "reader-reads", "--role=pod-reader", "--serviceaccount=default:reader"
    )
    assert api.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 200
    assert api.request("GET", "/api/v1/namespaces/kube-system/pods", token=token)[0] == 403
    assert _can_i(api, token, "list", "pods", "default")
    assert not _can_i(api, token, "list", "pods", "kube-system")
    user = "system:serviceaccount:default:reader"
    assert kubectl.out("auth", "can-i", "list", "pods", f"--as={user}").strip() == "yes"
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "resourceAttributes": {"verb": "watch", "resource": "pods", "namespace": "default"},
        },
    }
    status, answer = api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert status == 201 and answer["status"]["allowed"] is True
    kubectl.out("delete", "rolebinding", "reader-reads")
    assert api.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 403


def test_escalation_needs_the_permissions_or_escalate_and_bind(
    api: ApiServerProcess, kubectl: Kubectl
) -> None:
    token = _account_token(api, "rbac-writer")
    kubectl.out("create", "role", "rbac-writer", "--verb=create,get,update", "--resource=roles,rolebindings")
    kubectl.out(
        "create", "rolebinding", "rbac-writer", "--role=rbac-writer", "--serviceaccount=default:rbac-writer"
    )
    secrets_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "secret-reader"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}],
    }
    status, answer = api.request("POST", f"{RBAC}/namespaces/default/roles", secrets_role, token=token)
    assert status == 403, answer
    assert answer["message"] == (
        'roles.rbac.authorization.k8s.io "secret-reader" is forbidden: '
        'user "system:serviceaccount:default:rbac-writer" (groups=["system:serviceaccounts" '
        '"system:serviceaccounts:default" "system:authenticated"]) is attempting to grant RBAC permissions '
        "not currently held:\n"
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["list"]}'
    )
    # a role granting what the writer holds is fine; binding it is fine too
    own = {**secrets_role, "metadata": {"name": "writer-copy"}, "rules": [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["get"]}
    ]}  # fmt: skip
    assert api.request("POST", f"{RBAC}/namespaces/default/roles", own, token=token)[0] == 201
    assert api.request("POST", f"{RBAC}/namespaces/default/roles", secrets_role)[0] == 201  # admin
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "me-secrets"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secret-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "rbac-writer", "namespace": "default"}],
    }
    status, answer = api.request("POST", f"{RBAC}/namespaces/default/rolebindings", binding, token=token)
    assert status == 403 and "attempting to grant RBAC permissions not currently held" in answer["message"]
    kubectl.out(
        "create", "role", "binder", "--verb=bind", "--resource=roles", "--resource-name=secret-reader"
    )
    kubectl.out("create", "rolebinding", "binder", "--role=binder", "--serviceaccount=default:rbac-writer")
    status, answer = api.request("POST", f"{RBAC}/namespaces/default/rolebindings", binding, token=token)
    assert status == 201, answer
    assert api.request("GET", "/api/v1/namespaces/default/secrets", token=token)[0] == 200
    kubectl.out("create", "role", "escalator", "--verb=escalate", "--resource=roles")
    kubectl.out(
        "create", "rolebinding", "escalator", "--role=escalator", "--serviceaccount=default:rbac-writer"
    )
    everything = {**secrets_role, "metadata": {"name": "nodes-too"}, "rules": [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}
    ]}  # fmt: skip
    assert api.request("POST", f"{RBAC}/namespaces/default/roles", everything, token=token)[0] == 201


def test_the_bootstrap_policy_is_stored(kubectl: Kubectl) -> None:
    out = kubectl.out("get", "clusterrolebinding", "system:kube-scheduler", "-o", "wide").splitlines()
    name, role, _age, user = out[1].split()
    assert (name, role, user) == (
        "system:kube-scheduler",
        "ClusterRole/system:kube-scheduler",
        "system:kube-scheduler",
    )
    role = kubectl.out("get", "clusterrole", "cluster-admin", "-o", "jsonpath={.metadata.annotations}")
    assert '"rbac.authorization.kubernetes.io/autoupdate":"true"' in role
    rules = kubectl.out(
        "get", "clusterrole", "system:discovery", "-o", "jsonpath={.rules[0].nonResourceURLs}"
    )
    assert '"/apis/*"' in rules


def test_can_i_list_shows_the_rules_of_stored_bindings(
    api: ApiServerProcess, kubectl: Kubectl, tmp_path: Path
) -> None:
    alice = Kubectl(api.kubeconfig_for("alice"), tmp_path / "alice-cache")
    assert alice.run("auth", "can-i", "list", "configmaps", check=False).stdout.strip() == "no"
    kubectl.out("create", "clusterrole", "cm-reader", "--verb=get,list", "--resource=configmaps")
    kubectl.out(
        "create", "rolebinding", "alice-cm", "--clusterrole=cm-reader", "--user=alice", "-n", "default"
    )
    assert alice.out("auth", "can-i", "list", "configmaps").strip() == "yes"
    assert (
        alice.run("auth", "can-i", "list", "configmaps", "-n", "kube-system", check=False).stdout.strip()
        == "no"
    )
    listed = alice.out("auth", "can-i", "--list", "-n", "default")
    assert any(line.split()[:1] == ["configmaps"] and "[get list]" in line for line in listed.splitlines())
