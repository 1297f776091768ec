"""Protobuf bodies of `kubectl create role|clusterrole|rolebinding|clusterrolebinding`, as JSON objects.

Field numbers are k8s.io/api/rbac/v1/generated.proto's: Role and ClusterRole {metadata 1, rules 2,
aggregationRule 3 (ClusterRole) {clusterRoleSelectors 1}}, PolicyRule {verbs 1, apiGroups 2, resources 3,
resourceNames 4, nonResourceURLs 5}, RoleBinding and ClusterRoleBinding {metadata 1, subjects 2, roleRef 3},
Subject {kind 1, apiGroup 2, name 3, namespace 4}, RoleRef {apiGroup 1, kind 2, name 3}.
A label selector is read for its matchLabels, the only part `kubectl create clusterrole --aggregation-rule`
writes.
"""

from __future__ import annotations

from typing import Any

from apiserver import protowire as pw
from apiserver.protobody import object_meta, string_map
from apiserver.resources import RBAC_GROUP

RULE_LISTS = (("verbs", 1), ("apiGroups", 2), ("resources", 3), ("resourceNames", 4), ("nonResourceURLs", 5))


def _strings(data: bytes, number: int) -> list[str]:
    return [value.decode() for value in pw.repeated(data, number)]


def _rule(data: bytes) -> dict[str, Any]:
    rule: dict[str, Any] = {"verbs": _strings(data, 1)}
    for key, number in RULE_LISTS[1:]:
        if values := _strings(data, number):
            rule[key] = values
    return rule


def _role(kind: str, data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": kind,
        "apiVersion": f"{RBAC_GROUP}/v1",
        "metadata": object_meta(pw.message(data, 1)),
        "rules": [_rule(rule) for rule in pw.repeated(data, 2)],
    }
    if aggregation := pw.message(data, 3):
        selectors = [{"matchLabels": string_map(s, 1)} for s in pw.repeated(aggregation, 1)]
        out["aggregationRule"] = {"clusterRoleSelectors": selectors}
    return out


def _subject(data: bytes) -> dict[str, Any]:
    keys = ("kind", "apiGroup", "name", "namespace")
    return {key: pw.string(data, i) for i, key in enumerate(keys, 1) if pw.string(data, i)}


def _binding(kind: str, data: bytes) -> dict[str, Any]:
    ref = pw.message(data, 3)
    return {
        "kind": kind,
        "apiVersion": f"{RBAC_GROUP}/v1",
        "metadata": object_meta(pw.message(data, 1)),
        "subjects": [_subject(subject) for subject in pw.repeated(data, 2)],
        "roleRef": {"apiGroup": pw.string(ref, 1), "kind": pw.string(ref, 2), "name": pw.string(ref, 3)},
    }


RBAC_DECODERS = {
    "Role": lambda data: _role("Role", data),
    "ClusterRole": lambda data: _role("ClusterRole", data),
    "RoleBinding": lambda data: _binding("RoleBinding", data),
    "ClusterRoleBinding": lambda data: _binding("ClusterRoleBinding", data),
}
