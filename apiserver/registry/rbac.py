"""rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding, ClusterRoleBinding: kube's defaults and
validation (pkg/apis/rbac/v1 defaults, pkg/apis/rbac/validation).

- Names are path segments (kube's ValidateRBACName), so `system:kube-scheduler` is a valid name.
- A rule names verbs, and either API groups and resources or (ClusterRoles only) non-resource URLs.
- A binding's roleRef names apiGroup rbac.authorization.k8s.io, kind Role or ClusterRole (a
  ClusterRoleBinding: ClusterRole only) and a name, and never changes ("cannot change roleRef"): to bind
  another role, delete and re-create, as in kube.
- Subjects are User, Group (apiGroup rbac.authorization.k8s.io, the default) or ServiceAccount (apiGroup "",
  a namespace: required in a ClusterRoleBinding, the binding's own when left out of a RoleBinding).
A ClusterRole's aggregationRule is stored as sent; no controller aggregates it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.registry.base import Cause, Strategy, value_repr
from apiserver.resources import RBAC_GROUP

SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def path_segment_problem(name: str) -> str:
    """kube's path.IsValidPathSegmentName: the message, or "" when the name is valid."""
    if name in (".", ".."):
        return f"may not be '{name}'"
    for bad in ("/", "%"):
        if bad in name:
            return f"may not contain '{bad}'"
    return ""


def _supported(field: str, value: Any, allowed: tuple[str, ...]) -> Cause:
    choices = ", ".join(f'"{a}"' for a in allowed)
    return (
        field,
        "FieldValueNotSupported",
        f"Unsupported value: {value_repr(value)}: supported values: {choices}",
    )


def rule_causes(obj: Mapping[str, Any], *, namespaced: bool) -> list[Cause]:
    """kube's ValidatePolicyRule for each of obj's rules."""
    causes: list[Cause] = []
    for i, rule in enumerate(obj.get("rules") or []):
        where = f"rules[{i}]"
        if not rule.get("verbs"):
            causes.append(
                (
                    f"{where}.verbs",
                    "FieldValueRequired",
                    "Required value: verbs must contain at least one value",
                )
            )
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                causes.append(
                    (
                        f"{where}.nonResourceURLs",
                        "FieldValueInvalid",
                        f"Invalid value: {_go_list(urls)}: namespaced rules cannot apply to non-resource "
                        "URLs",
                    )
                )
            if rule.get("apiGroups") or rule.get("resources"):
                causes.append(
                    (
                        f"{where}.nonResourceURLs",
                        "FieldValueInvalid",
                        f"Invalid value: {_go_list(urls)}: rules cannot apply to both regular resources and "
                        "non-resource URLs",
                    )
                )
            continue
        if not rule.get("apiGroups"):
            causes.append(
                (
                    f"{where}.apiGroups",
                    "FieldValueRequired",
                    "Required value: resource rules must supply at least one api group",
                )
            )
        if not rule.get("resources"):
            causes.append(
                (
                    f"{where}.resources",
                    "FieldValueRequired",
                    "Required value: resource rules must supply at least one resource",
                )
            )
    return causes


def _go_list(values: list[Any]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _name_causes(name: str) -> list[Cause]:
    if not name:
        return [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")]
    problem = path_segment_problem(name)
    return (
        [("metadata.name", "FieldValueInvalid", f"Invalid value: {value_repr(name)}: {problem}")]
        if problem
        else []
    )


class RoleStrategy(Strategy):
    model = "V1Role"

    def check_name(self, name: str) -> list[Cause]:
        return _name_causes(name)

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        return rule_causes(obj, namespaced=self.info.namespaced)


class ClusterRoleStrategy(RoleStrategy):
    model = "V1ClusterRole"


def default_subjects(obj: dict[str, Any]) -> None:
    """v1 SetDefaults_Subject: apiGroup "" for a ServiceAccount, rbac.authorization.k8s.io for the rest."""
    for subject in obj.get("subjects") or []:
        if isinstance(subject, dict) and not subject.get("apiGroup"):
            subject["apiGroup"] = "" if subject.get("kind") == "ServiceAccount" else RBAC_GROUP
            if subject["apiGroup"] == "":
                del subject["apiGroup"]


class RoleBindingStrategy(Strategy):
    model = "V1RoleBinding"
    ref_kinds: tuple[str, ...] = ("Role", "ClusterRole")

    def check_name(self, name: str) -> list[Cause]:
        return _name_causes(name)

    def prepare_create(self, obj: dict[str, Any]) -> None:
        default_subjects(obj)

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        default_subjects(new)

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        ref = obj.get("roleRef") or {}
        causes: list[Cause] = []
        if old is not None and ref != (old.get("roleRef") or {}):
            shown = ", ".join(
                f'{k}:"{ref.get(k.lower() if k != "APIGroup" else "apiGroup", "")}"'
                for k in ("APIGroup", "Kind", "Name")
            )
            return [
                (
                    "roleRef",
                    "FieldValueInvalid",
                    f"Invalid value: rbac.RoleRef{{{shown}}}: cannot change roleRef",
                )
            ]
        if ref.get("apiGroup") != RBAC_GROUP:
            causes.append(_supported("roleRef.apiGroup", ref.get("apiGroup") or "", (RBAC_GROUP,)))
        if ref.get("kind") not in self.ref_kinds:
            causes.append(_supported("roleRef.kind", ref.get("kind") or "", self.ref_kinds))
        name = ref.get("name")
        if not name:
            causes.append(("roleRef.name", "FieldValueRequired", "Required value"))
        elif problem := path_segment_problem(str(name)):
            causes.append(
                ("roleRef.name", "FieldValueInvalid", f"Invalid value: {value_repr(name)}: {problem}")
            )
        for i, subject in enumerate(obj.get("subjects") or []):
            causes += self._subject_causes(f"subjects[{i}]", subject)
        return causes

    def _subject_causes(self, where: str, subject: Mapping[str, Any]) -> list[Cause]:
        causes: list[Cause] = []
        kind, name, group = subject.get("kind"), subject.get("name"), subject.get("apiGroup") or ""
        if not name:
            causes.append((f"{where}.name", "FieldValueRequired", "Required value"))
        if kind == "ServiceAccount":
            if group:
                causes.append(_supported(f"{where}.apiGroup", group, ("",)))
            if not subject.get("namespace") and not self.info.namespaced:
                causes.append((f"{where}.namespace", "FieldValueRequired", "Required value"))
        elif kind in ("User", "Group"):
            if group != RBAC_GROUP:
                causes.append(_supported(f"{where}.apiGroup", group, (RBAC_GROUP,)))
        else:
            causes.append(_supported(f"{where}.kind", kind or "", SUBJECT_KINDS))
        return causes


class ClusterRoleBindingStrategy(RoleBindingStrategy):
    model = "V1ClusterRoleBinding"
    ref_kinds = ("ClusterRole",)
