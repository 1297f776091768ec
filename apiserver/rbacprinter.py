"""Table columns of the rbac.authorization.k8s.io/v1 kinds, as kube's printers.go prints them.

Roles and ClusterRoles: NAME, CREATED AT (the creation time in RFC 3339, not an age). RoleBindings and
ClusterRoleBindings: NAME, ROLE (`Kind/name`), AGE, and with `-o wide` USERS, GROUPS, SERVICEACCOUNTS
(`namespace/name`), each a comma-separated list (kube's SubjectsStrings).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.resources import RBAC_GROUP
from apiserver.tablecells import AGE, AGE_DESCRIPTION, NAME, Obj, column, since
from apiserver.tablecells import meta as _meta

ROLE_COLUMNS = [NAME, column("Created At", AGE_DESCRIPTION, kind="date")]
BINDING_COLUMNS = [
    NAME,
    column("Role", ""),
    AGE,
    column("Users", "", priority=1),
    column("Groups", "", priority=1),
    column("ServiceAccounts", "", priority=1),
]


def role_cells(obj: Obj, now: datetime) -> list[Any]:
    return [_meta(obj).get("name", ""), str(_meta(obj).get("creationTimestamp") or "")]


def subjects_strings(obj: Obj) -> tuple[str, str, str]:
    """kube's SubjectsStrings: users, groups and service accounts, each joined by ", "."""
    kinds: dict[str, list[str]] = {"User": [], "Group": [], "ServiceAccount": []}
    for subject in obj.get("subjects") or []:
        kind, name = str(subject.get("kind") or ""), str(subject.get("name") or "")
        if kind == "ServiceAccount":
            name = f"{subject.get('namespace') or ''}/{name}"
        kinds.get(kind, []).append(name)
    return ", ".join(kinds["User"]), ", ".join(kinds["Group"]), ", ".join(kinds["ServiceAccount"])


def binding_cells(obj: Obj, now: datetime) -> list[Any]:
    ref = obj.get("roleRef") or {}
    return [
        _meta(obj).get("name", ""),
        f"{ref.get('kind') or ''}/{ref.get('name') or ''}",
        since(_meta(obj).get("creationTimestamp"), now),
        *subjects_strings(obj),
    ]


RBAC_PRINTERS = {
    (RBAC_GROUP, "roles"): (ROLE_COLUMNS, role_cells),
    (RBAC_GROUP, "clusterroles"): (ROLE_COLUMNS, role_cells),
    (RBAC_GROUP, "rolebindings"): (BINDING_COLUMNS, binding_cells),
    (RBAC_GROUP, "clusterrolebindings"): (BINDING_COLUMNS, binding_cells),
}
