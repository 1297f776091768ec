"""`--authorization-policy-file FILE`: RBAC objects from a YAML file, beside the stored ones (rbacstore.py).

Roles and bindings are created through the rbac.authorization.k8s.io API; this flag adds those of a file
that the server reads but does not store: any multi-document YAML (a deploy/ manifest as it is) whose
Role, ClusterRole, RoleBinding and ClusterRoleBinding documents are loaded; every other kind is skipped.
Flow: `load_policy` turns each binding into `Grant`s (its subjects, its scope, the rules of the role it
names); `Policy.decide` answers a request with the grant that allows it, with kube's RBAC semantics:
- a ClusterRoleBinding applies everywhere; a RoleBinding only in its namespace (to a Role there or a
  ClusterRole's rules);
- subjects: User (the user name), Group (one of the user's groups), ServiceAccount (the user
  `system:serviceaccount:<namespace>:<name>`);
- a rule matches on verb, apiGroup and resource (`plural` or `plural/subresource`), "*" matching any;
  with resourceNames it matches only requests that name one of them (so never create, list or watch);
  nonResourceURLs (ClusterRoles only) match the path, a trailing "*" being a prefix.
A role a binding names but the file lacks grants nothing (as in kube: the binding dangles).
The server reads the file again when it changes (`ReloadingPolicy`), so an edit applies without a restart.
`parse_rules` and `parse_subjects` also read the stored objects (rbacstore.py).
Every decision about a subject the file names is logged, allowed or denied, with the binding that
allowed it: the audit that tests/test_deploy_rbac.py reads to check a manifest grants exactly the
verbs a component uses.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from apiserver.auth import UserInfo
from apiserver.auth.files import FileWatch
from apiserver.request import RequestInfo
from kubenode import yamlload

log = logging.getLogger("apiserver.audit")

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")


@dataclass(frozen=True)
class PolicyRule:
    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    resource_names: frozenset[str]
    urls: tuple[str, ...]

    def matches(self, info: RequestInfo) -> bool:
        if "*" not in self.verbs and info.verb not in self.verbs:
            return False
        if not info.is_resource_request:
            return any(
                info.path == u or (u.endswith("*") and info.path.startswith(u[:-1])) for u in self.urls
            )
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        if "*" not in self.api_groups and info.api_group not in self.api_groups:
            return False
        if "*" not in self.resources and resource not in self.resources:
            return False
        return not self.resource_names or info.name in self.resource_names


@dataclass(frozen=True)
class Subject:
    kind: str  # User, Group or ServiceAccount
    name: str
    namespace: str = ""

    def matches(self, user: UserInfo) -> bool:
        if self.kind == "User":
            return user.name == self.name
        if self.kind == "Group":
            return self.name in user.groups
        return user.name == f"system:serviceaccount:{self.namespace}:{self.name}"


@dataclass(frozen=True)
class Grant:
    source: str  # e.g. "RoleBinding kube-system/x -> Role y", for the audit line
    namespace: str  # "" for a ClusterRoleBinding: everywhere
    subjects: tuple[Subject, ...]
    rules: tuple[PolicyRule, ...]

    def allows(self, user: UserInfo, info: RequestInfo) -> bool:
        if self.namespace and info.namespace != self.namespace:
            return False
        return any(s.matches(user) for s in self.subjects) and any(r.matches(info) for r in self.rules)


class Policy:
    def __init__(self, grants: Iterable[Grant]) -> None:
        self.grants = tuple(grants)

    def names(self, user: UserInfo) -> bool:
        """Does any binding in the file name this user (so its decisions are audited)?"""
        return any(s.matches(user) for g in self.grants for s in g.subjects)

    def decide(self, user: UserInfo, info: RequestInfo) -> Grant | None:
        grant = next((g for g in self.grants if g.allows(user, info)), None)
        if grant is not None:
            log.info("RBAC ALLOW %s by %s", describe(user, info), grant.source)
        return grant

    def denied(self, user: UserInfo, info: RequestInfo) -> None:
        if self.names(user):
            log.warning("RBAC DENY %s", describe(user, info))


def describe(user: UserInfo, info: RequestInfo) -> str:
    """One parseable line: user="u" verb=v group="g" resource="r[/sub]" namespace="n" name="x" path="p"."""
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    return (
        f'user="{user.name}" verb={info.verb} group="{info.api_group}" resource="{resource}"'
        f' namespace="{info.namespace}" name="{info.name}" path="{info.path}"'
    )


class PolicyError(ValueError):
    """The file, the document and the field that is wrong."""


def _strings(doc: str, where: str, value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{doc}: {where}: expected a list of strings")
    return frozenset(value)


def parse_rules(doc: str, obj: Mapping[str, Any]) -> tuple[PolicyRule, ...]:
    rules = obj.get("rules") or []
    if not isinstance(rules, list):
        raise PolicyError(f"{doc}: rules: expected a list")
    parsed = []
    for i, entry in enumerate(rules):
        where = f"rules[{i}]"
        if not isinstance(entry, Mapping):
            raise PolicyError(f"{doc}: {where}: expected a mapping")
        verbs = _strings(doc, f"{where}.verbs", entry.get("verbs"))
        if not verbs:
            raise PolicyError(f"{doc}: {where}.verbs: required")
        parsed.append(
            PolicyRule(
                verbs=verbs,
                api_groups=_strings(doc, f"{where}.apiGroups", entry.get("apiGroups")),
                resources=_strings(doc, f"{where}.resources", entry.get("resources")),
                resource_names=_strings(doc, f"{where}.resourceNames", entry.get("resourceNames")),
                urls=tuple(sorted(_strings(doc, f"{where}.nonResourceURLs", entry.get("nonResourceURLs")))),
            )
        )
    return tuple(parsed)


def parse_subjects(doc: str, obj: Mapping[str, Any], namespace: str) -> tuple[Subject, ...]:
    subjects = []
    for i, entry in enumerate(obj.get("subjects") or []):
        kind = entry.get("kind") if isinstance(entry, Mapping) else None
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if kind not in ("User", "Group", "ServiceAccount") or not isinstance(name, str) or not name:
            raise PolicyError(f"{doc}: subjects[{i}]: need kind User, Group or ServiceAccount, and a name")
        sa_namespace = entry.get("namespace") or namespace
        if kind == "ServiceAccount" and not sa_namespace:
            raise PolicyError(f"{doc}: subjects[{i}].namespace: required for a ServiceAccount")
        subjects.append(Subject(kind, name, str(sa_namespace) if kind == "ServiceAccount" else ""))
    return tuple(subjects)


def load_policy(path: Path) -> Policy:
    """Read every RBAC document of `path`; raises PolicyError naming the file, document and field."""
    try:
        documents = [d for d in yamlload.load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyError(f"{path}: {exc}") from None
    roles: dict[tuple[str, str, str], tuple[PolicyRule, ...]] = {}
    bindings: list[tuple[str, Mapping[str, Any]]] = []
    for index, obj in enumerate(documents):
        if not isinstance(obj, Mapping):
            raise PolicyError(f"{path}: document {index + 1}: expected a mapping")
        kind = obj.get("kind")
        if kind not in ROLE_KINDS + BINDING_KINDS:
            continue
        meta = obj.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        doc = f"{path}: {kind} {namespace + '/' if namespace else ''}{name}"
        if not name:
            raise PolicyError(f"{path}: document {index + 1} ({kind}): metadata.name: required")
        if kind in ("Role", "RoleBinding") and not namespace:
            raise PolicyError(f"{doc}: metadata.namespace: required for a {kind}")
        if kind in ROLE_KINDS:
            roles[(str(kind), namespace if kind == "Role" else "", name)] = parse_rules(doc, obj)
        else:
            bindings.append((doc, obj))
    grants = []
    for doc, obj in bindings:
        kind, meta = obj["kind"], obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "") if kind == "RoleBinding" else ""
        ref = obj.get("roleRef") or {}
        ref_kind, ref_name = ref.get("kind"), ref.get("name")
        if ref_kind not in ROLE_KINDS or not ref_name or ref.get("apiGroup", RBAC_GROUP) != RBAC_GROUP:
            raise PolicyError(f"{doc}: roleRef: need apiGroup {RBAC_GROUP}, kind Role or ClusterRole, a name")
        if kind == "ClusterRoleBinding" and ref_kind == "Role":
            raise PolicyError(f"{doc}: roleRef.kind: a ClusterRoleBinding can only refer to a ClusterRole")
        rules = roles.get((ref_kind, namespace if ref_kind == "Role" else "", ref_name), ())
        source = f"{kind} {meta.get('name')} -> {ref_kind} {ref_name}"
        grants.append(Grant(source, namespace, parse_subjects(doc, obj, namespace), rules))
    return Policy(grants)


class ReloadingPolicy(Policy):
    """The file's policy, read again when the file changes (files.FileWatch), so a RoleBinding added to it
    applies without a restart, as one created in kube would; a file that stops parsing keeps the last good
    policy (logged)."""

    def __init__(self, path: Path, recheck_seconds: float = 0.25) -> None:
        self._watch = FileWatch(path, recheck_seconds)
        super().__init__(load_policy(path).grants)

    def _maybe_reload(self) -> None:
        if not self._watch.changed():
            return
        try:
            self.grants = load_policy(self._watch.path).grants
        except PolicyError as exc:
            log.warning("keeping the previous RBAC policy: %s", exc)
            return
        log.info("RBAC policy reloaded from %s: %d binding(s)", self._watch.path, len(self.grants))

    def names(self, user: UserInfo) -> bool:
        self._maybe_reload()
        return super().names(user)

    def decide(self, user: UserInfo, info: RequestInfo) -> Grant | None:
        self._maybe_reload()
        return super().decide(user, info)
