"""kube's bootstrap RBAC policy as stored objects, reconciled at every start (kube's
storage_rbac.go PostStartHook with bootstrappolicy).

The ClusterRoles and ClusterRoleBindings this server's authorizer has compiled in (authz.py: the
discovery roles, system:kube-scheduler, system:kube-controller-manager, system:monitoring,
system:service-account-issuer-discovery) and cluster-admin bound to system:masters are written as objects
labelled `kubernetes.io/bootstrapping: rbac-defaults` and annotated
`rbac.authorization.kubernetes.io/autoupdate: "true"`. At each start a missing one is created, and one still
annotated "true" gets the bootstrap rules, roleRef and subjects back (kube adds what is missing; here the
object is reset, as this server knows no other content for them); one set to "false" is left alone.
The compiled rules stay the authorizer's fast path, so the answers for these users never wait on the index.

Besides, every other object kube-apiserver v1.37 bootstraps (kube_bootstrap_rbac.py, read from a real one by
tools/gen_kube_bootstrap_rbac.py): the controllers' roles `system:controller:*` bound to their
ServiceAccounts in kube-system (what kube-controller-manager runs its controllers as under
--use-service-account-credentials), admin/edit/view, the node proxier's, the Roles and RoleBindings of
kube-system and kube-public. Those are enforced from the store (rbacstore.py), as any stored RBAC object.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from apiserver.auth import AUTHENTICATED_GROUP, CONTROLLER_MANAGER_USER, MASTERS_GROUP, SCHEDULER_USER
from apiserver.auth.authz import (
    BASIC_USER_RULES,
    CONTROLLER_MANAGER_RULES,
    DISCOVERY_ONLY_RULES,
    EVERYTHING,
    ISSUER_DISCOVERY_RULES,
    MONITORING_GROUP,
    MONITORING_RULES,
    PUBLIC_INFO_RULES,
    SCHEDULER_RULES,
    SERVICEACCOUNTS_GROUP,
    VOLUME_SCHEDULER_RULES,
    Rule,
)
from apiserver.resources import RBAC_GROUP

AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAPPING_LABEL = "kubernetes.io/bootstrapping"
UNAUTHENTICATED_GROUP = "system:unauthenticated"

# (ClusterRole name, its rules, the subjects of the ClusterRoleBinding of the same name as (kind, name))
BOOTSTRAP: tuple[tuple[str, tuple[Rule, ...], tuple[tuple[str, str], ...]], ...] = (
    ("cluster-admin", EVERYTHING, (("Group", MASTERS_GROUP),)),
    ("system:discovery", DISCOVERY_ONLY_RULES, (("Group", AUTHENTICATED_GROUP),)),
    ("system:basic-user", BASIC_USER_RULES, (("Group", AUTHENTICATED_GROUP),)),
    (
        "system:public-info-viewer",
        PUBLIC_INFO_RULES,
        (("Group", AUTHENTICATED_GROUP), ("Group", UNAUTHENTICATED_GROUP)),
    ),
    ("system:monitoring", MONITORING_RULES, (("Group", MONITORING_GROUP),)),
    ("system:service-account-issuer-discovery", ISSUER_DISCOVERY_RULES, (("Group", SERVICEACCOUNTS_GROUP),)),
    ("system:kube-scheduler", SCHEDULER_RULES, (("User", SCHEDULER_USER),)),
    ("system:volume-scheduler", VOLUME_SCHEDULER_RULES, (("User", SCHEDULER_USER),)),
    ("system:kube-controller-manager", CONTROLLER_MANAGER_RULES, (("User", CONTROLLER_MANAGER_USER),)),
)


def _rule_object(rule: Rule) -> dict[str, Any]:
    if rule.urls:
        return {"verbs": sorted(rule.verbs), "nonResourceURLs": list(rule.urls)}
    out: dict[str, Any] = {
        "verbs": sorted(rule.verbs),
        "apiGroups": sorted(rule.groups),
        "resources": sorted(rule.resources),
    }
    if rule.names:
        out["resourceNames"] = sorted(rule.names)
    return out


def _meta(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {BOOTSTRAPPING_LABEL: "rbac-defaults"},
        "annotations": {AUTOUPDATE: "true"},
    }


def kube_objects() -> list[tuple[str, dict[str, Any]]]:
    """kube's own bootstrap objects, as kube_bootstrap_rbac.py has them."""
    from apiserver.auth.kube_bootstrap_rbac import OBJECTS_JSON

    loaded: list[tuple[str, dict[str, Any]]] = [(r, o) for r, o in orjson.loads(OBJECTS_JSON)]
    return loaded


def bootstrap_objects() -> list[tuple[str, dict[str, Any]]]:
    """(resource, object) for each bootstrap ClusterRole and ClusterRoleBinding: the compiled ones, then
    kube's others (Roles and RoleBindings of kube-system and kube-public among them)."""
    objects: list[tuple[str, dict[str, Any]]] = []
    for name, rules, subjects in BOOTSTRAP:
        role = {
            "kind": "ClusterRole",
            "apiVersion": f"{RBAC_GROUP}/v1",
            "metadata": _meta(name),
            "rules": [_rule_object(r) for r in rules],
        }
        binding = {
            "kind": "ClusterRoleBinding",
            "apiVersion": f"{RBAC_GROUP}/v1",
            "metadata": _meta(name),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": kind, "apiGroup": RBAC_GROUP, "name": who} for kind, who in subjects],
        }
        objects += [("clusterroles", role), ("clusterrolebindings", binding)]
    compiled = {(resource, obj["metadata"]["name"]) for resource, obj in objects}
    objects += [(r, o) for r, o in kube_objects() if (r, o["metadata"]["name"]) not in compiled]
    return objects


CONTENT_FIELDS: dict[str, Sequence[str]] = {
    "clusterroles": ("rules",),
    "clusterrolebindings": ("roleRef", "subjects"),
    "roles": ("rules",),
    "rolebindings": ("roleRef", "subjects"),
}


async def ensure_bootstrap_policy(
    store: Any, strategies: Any, objects: Iterable[tuple[str, dict[str, Any]]]
) -> int:
    """Create the missing bootstrap objects and reset those still annotated autoupdate "true"; returns how
    many were written."""
    written = 0
    pending: list[Any] = []  # queued together: the store commits them as one batch (~140 objects)
    for resource, wanted in objects:
        name = wanted["metadata"]["name"]
        namespace = str(wanted["metadata"].get("namespace") or "")
        current = store.latest(resource, namespace, name)
        if current is None:
            strategies[resource].new_metadata(wanted, namespace)
            pending.append(store.write(resource, namespace, name, wanted, "ADDED"))
            written += 1
            continue
        obj = orjson.loads(current.data)
        if (obj["metadata"].get("annotations") or {}).get(AUTOUPDATE) != "true":
            continue
        fields = CONTENT_FIELDS[resource]
        if all(obj.get(f) == wanted.get(f) for f in fields if f in wanted):
            continue
        obj.update({f: wanted[f] for f in fields if f in wanted})
        pending.append(store.write(resource, namespace, name, obj, "MODIFIED"))
        written += 1
    await asyncio.gather(*pending)
    return written
