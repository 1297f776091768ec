"""RBAC privilege-escalation prevention: kube's policy-based Role and binding storage
(pkg/registry/rbac/*/policybased, pkg/registry/rbac/escalation_check.go).

A user may create or update a Role or ClusterRole only if it already holds every permission the role grants
(kube's "covers" check), unless it may `escalate` roles/clusterroles; and a RoleBinding or
ClusterRoleBinding only if it holds every permission of the role it names, unless it may `bind` that role.
system:masters may do both. Holding a permission means the server's authorizer allows it, so the bootstrap
rules, the stored bindings, the policy file and the Node authorizer all count.
Flow: `validate` (a Validator, run on each write after NodeRestriction) expands each rule into the single
requests it allows (verb x group x resource x name, or verb x URL) and asks the authorizer about each; the
ones refused are listed in kube's 403 text; a ClusterRole with an aggregationRule (new or old) also needs
* on *.* (kube: "must have cluster-admin privileges to use the aggregationRule"). Binding a role that does
not exist, without `bind`, is kube's 404 on that role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from apiserver.admission import Verdict
from apiserver.auth import MASTERS_GROUP, UserInfo
from apiserver.auth.authz import Authorizer
from apiserver.auth.policyfile import PolicyError, PolicyRule, parse_rules
from apiserver.request import RequestInfo
from apiserver.resources import RBAC_GROUP
from apiserver.status import forbidden, not_found, qualified

ROLE_RESOURCES = ("roles", "clusterroles")
BINDING_RESOURCES = ("rolebindings", "clusterrolebindings")
RoleRules = Callable[[tuple[str, str, str]], "tuple[PolicyRule, ...] | None"]


def _atoms(rule: PolicyRule, namespace: str) -> Iterator[tuple[RequestInfo, str]]:
    """The single requests a rule allows, each with kube's compact text of it."""
    for verb in sorted(rule.verbs):
        for url in rule.urls:
            yield (
                RequestInfo(False, url, verb, "", "", "", "", "", ""),
                (f'{{NonResourceURLs:["{url}"], Verbs:["{verb}"]}}'),
            )
        for group in sorted(rule.api_groups):
            for resource in sorted(rule.resources):
                plural, _, sub = resource.partition("/")
                for name in sorted(rule.resource_names) or [""]:
                    names = f', ResourceNames:["{name}"]' if name else ""
                    info = RequestInfo(True, "", verb, group, "", namespace, plural, sub, name)
                    yield (
                        info,
                        f'{{APIGroups:["{group}"], Resources:["{resource}"]{names}, Verbs:["{verb}"]}}',
                    )


def missing(
    authorizer: Authorizer, user: UserInfo, rules: tuple[PolicyRule, ...], namespace: str
) -> list[str]:
    """The permissions of `rules` that `user` does not hold in `namespace`, in kube's compact form."""
    return [
        text
        for rule in rules
        for info, text in _atoms(rule, namespace)
        if not authorizer.authorize(user, info).allowed
    ]


class EscalationCheck:
    """The Validator: `role_rules` answers a stored role's rules by (resource, namespace, name)."""

    def __init__(self, authorizer: Authorizer, role_rules: RoleRules) -> None:
        self.authorizer = authorizer
        self.role_rules = role_rules

    def validate(
        self, user: Any, info: RequestInfo, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> Verdict | None:
        if new is None or info.api_group != RBAC_GROUP or not isinstance(user, UserInfo):
            return None
        if MASTERS_GROUP in user.groups:
            return None
        meta = new.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        if info.resource in ROLE_RESOURCES:
            if self._allowed(user, "escalate", info.resource, namespace, ""):
                return None
            try:
                rules = parse_rules(name, new)
            except PolicyError:
                return None  # validation has answered 422 already
        elif info.resource in BINDING_RESOURCES:
            ref = new.get("roleRef") or {}
            role_resource = "roles" if ref.get("kind") == "Role" else "clusterroles"
            role_name = str(ref.get("name") or "")
            if self._allowed(user, "bind", role_resource, namespace, role_name):
                return None
            found = self.role_rules((role_resource, namespace if role_resource == "roles" else "", role_name))
            if found is None:
                return Verdict(denied=not_found(role_resource, role_name, RBAC_GROUP))
            rules = found
        else:
            return None
        lacking = missing(self.authorizer, user, rules, namespace)
        if not lacking:
            # kube's clusterrole storage: an aggregationRule can gather anything, so setting or changing
            # one needs * on *.* (cluster-admin), unless the user may escalate.
            aggregating = info.resource == "clusterroles" and (_aggregates(new) or _aggregates(old))
            if aggregating and missing(self.authorizer, user, _full_authority(), ""):
                why = "must have cluster-admin privileges to use the aggregationRule"
                text = f'{qualified(info.resource, RBAC_GROUP)} "{name}" is forbidden: {why}'
                return Verdict(denied=forbidden(text))
            return None
        groups = " ".join(f'"{g}"' for g in user.groups)
        text = (
            f'{qualified(info.resource, RBAC_GROUP)} "{name}" is forbidden: user "{user.name}" '
            f"(groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n"
            + "\n".join(lacking)
        )
        return Verdict(denied=forbidden(text))

    def _allowed(self, user: UserInfo, verb: str, resource: str, namespace: str, name: str) -> bool:
        info = RequestInfo(True, "", verb, RBAC_GROUP, "v1", namespace, resource, "", name)
        return self.authorizer.authorize(user, info).allowed


def _aggregates(role: Mapping[str, Any] | None) -> bool:
    rule = (role or {}).get("aggregationRule")
    return isinstance(rule, Mapping) and bool(rule.get("clusterRoleSelectors"))


def _full_authority() -> tuple[PolicyRule, ...]:
    """kube's fullAuthority: * on *.* and * on every URL."""
    every = [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ]
    return parse_rules("full-authority", {"rules": every})
