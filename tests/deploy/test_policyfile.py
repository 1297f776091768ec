"""`--authorization-policy-file` follows kube's RBAC semantics (apiserver/auth/policyfile.py), through the
real Node,RBAC authorizer and the real request classification of the URLs a client sends."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver.auth import UserInfo
from apiserver.auth.authz import new_authorizer
from apiserver.request import request_info

POLICY = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules:
  - {apiGroups: [""], resources: ["pods", "pods/status"], verbs: ["get", "list"]}
  - {nonResourceURLs: ["/metrics"], verbs: ["get"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lease, namespace: kube-system}
rules:
  - {apiGroups: ["coordination.k8s.io"], resources: ["leases"], resourceNames: ["mine"], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader-in-team, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects: [{kind: Group, name: readers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lease, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease}
subjects: [{kind: ServiceAccount, name: elector}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects: [{kind: User, name: prometheus}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: skipped, namespace: kube-system}
"""

READER = UserInfo("alice", "", ("readers", "system:authenticated"))
ELECTOR = UserInfo("system:serviceaccount:kube-system:elector", "", ("system:serviceaccounts",))
PROMETHEUS = UserInfo("prometheus", "", ())


def allowed(
    tmp_path: Path, user: UserInfo, method: str, path: str, query: dict[str, str] | None = None
) -> bool:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return (
        new_authorizer("Node,RBAC", policy).authorize(user, request_info(method, path, query or {})).allowed
    )


@pytest.mark.parametrize(
    "user,method,path,expected",
    [
        (READER, "GET", "/api/v1/namespaces/team/pods/p", True),  # a RoleBinding: its namespace only
        (READER, "GET", "/api/v1/namespaces/other/pods/p", False),
        (READER, "GET", "/api/v1/namespaces/team/pods/p/status", True),  # subresource named in the rule
        (READER, "DELETE", "/api/v1/namespaces/team/pods/p", False),  # verb not granted
        (READER, "GET", "/metrics", False),  # nonResourceURLs only through a ClusterRoleBinding
        (PROMETHEUS, "GET", "/metrics", True),
        (PROMETHEUS, "GET", "/api/v1/pods", True),  # ClusterRoleBinding: every namespace, cluster-wide lists
        (ELECTOR, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/mine", True),
        (ELECTOR, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/theirs", False),
        (
            ELECTOR,
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            False,
        ),  # list: no name
        (
            ELECTOR,
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            False,
        ),  # create: no name
        (ELECTOR, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/mine", False),
    ],
)
def test_rbac_semantics(tmp_path: Path, user: UserInfo, method: str, path: str, expected: bool) -> None:
    assert allowed(tmp_path, user, method, path) is expected


@pytest.mark.parametrize(
    "text,message",
    [
        ("kind: Role\nmetadata: {name: r}\nrules: []\n", "Role r: metadata.namespace: required for a Role"),
        (
            "kind: ClusterRoleBinding\nmetadata: {name: b}\nroleRef: {kind: Role, name: r}\nsubjects: []\n",
            "ClusterRoleBinding b: roleRef.kind: a ClusterRoleBinding can only refer to a ClusterRole",
        ),
        (
            "kind: ClusterRoleBinding\nmetadata: {name: b}\nroleRef: {kind: ClusterRole, name: r}\n"
            "subjects: [{kind: ServiceAccount, name: sa}]\n",
            "ClusterRoleBinding b: subjects[0].namespace: required for a ServiceAccount",
        ),
        (
            "kind: ClusterRole\nmetadata: {name: c}\nrules: [{verbs: get}]\n",
            "rules[0].verbs: expected a list",
        ),
    ],
)
def test_a_bad_object_is_named_with_its_field(tmp_path: Path, text: str, message: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    with pytest.raises(ValueError) as caught:
        new_authorizer("Node,RBAC", policy)
    assert str(caught.value).startswith(f"--authorization-policy-file: {policy}: ")
    assert message in str(caught.value)
