"""RBAC from the stored rbac.authorization.k8s.io/v1 objects: kube's RBAC authorizer over its informers.

`StoredPolicy` keeps an index of the bindings by subject (a user name, a group, a service account as its
user name `system:serviceaccount:<ns>:<name>`) and the rules of every Role and ClusterRole. It catches up
lazily from the watch cache, as nodegraph.py does: on a question it applies the RBAC events committed since
it last looked (one pass over the new history, whatever the resource), or rebuilds from the cached objects
when that window was compacted away. A request is then judged by the few bindings that name its user or
one of its groups, never by a scan of them all.
Semantics are the policy file's (policyfile.py): a ClusterRoleBinding applies everywhere, a RoleBinding in
its namespace; a binding whose role does not exist grants nothing (it dangles, as in kube).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from apiserver.auth import UserInfo
from apiserver.auth.policyfile import Grant, PolicyError, PolicyRule, parse_rules, parse_subjects
from apiserver.request import RequestInfo
from apiserver.storage.cache import Entry, Event, Filter, WatchCache

ROLE_RESOURCES = ("roles", "clusterroles")
BINDING_RESOURCES = ("rolebindings", "clusterrolebindings")
RBAC_RESOURCES = frozenset(ROLE_RESOURCES + BINDING_RESOURCES)
RoleKey = tuple[str, str, str]  # (resource: roles|clusterroles, namespace, name)
BindingKey = tuple[str, str, str]  # (resource: rolebindings|clusterrolebindings, namespace, name)
MAX_COMPILED_USERS = 10_000  # users whose compiled rules are kept: more, and the cache starts over
CompiledRule = tuple[str, PolicyRule, Grant]  # (the binding's namespace or "" for everywhere, rule, grant)


@dataclass(frozen=True)
class StoredBinding:
    grant: Grant  # subjects and scope; its rules are looked up at decision time (the role may change)
    role: RoleKey


def subject_keys(user: UserInfo) -> Iterator[str]:
    yield "u:" + user.name
    for group in user.groups:
        yield "g:" + group


class StoredPolicy:
    """Answers `decide(user, info)` from the RBAC objects in the watch cache."""

    def __init__(self, cache: WatchCache) -> None:
        self.cache = cache
        self.revision = -1  # nothing seen yet: the first question builds from scratch
        self.roles: dict[RoleKey, tuple[PolicyRule, ...]] = {}
        self.bindings: dict[BindingKey, StoredBinding] = {}
        self.by_subject: dict[str, set[BindingKey]] = {}
        # Per user (name, groups): its grants' rules by verb ("*" under its own key), dropped whenever an RBAC
        # object changes. A request then looks at the few rules that name its verb.
        self.compiled: dict[tuple[str, tuple[str, ...]], dict[str, list[CompiledRule]]] = {}

    def decide(self, user: UserInfo, info: RequestInfo) -> Grant | None:
        self._catch_up()
        by_verb = self.compiled.get((user.name, user.groups))
        if by_verb is None:
            if len(self.compiled) >= MAX_COMPILED_USERS:
                self.compiled.clear()
            by_verb = self.compiled[(user.name, user.groups)] = self._compile(user)
        for candidates in (by_verb.get(info.verb), by_verb.get("*")):
            for namespace, rule, grant in candidates or ():
                if (not namespace or namespace == info.namespace) and rule.matches(info):
                    return grant
        return None

    def _compile(self, user: UserInfo) -> dict[str, list[CompiledRule]]:
        by_verb: dict[str, list[CompiledRule]] = {}
        for binding in self._bindings_of(user):
            for rule in self.roles.get(binding.role, ()):
                for verb in rule.verbs:
                    by_verb.setdefault(verb, []).append((binding.grant.namespace, rule, binding.grant))
        return by_verb

    def rules_of(self, user: UserInfo, namespace: str) -> list[PolicyRule]:
        """The rules that apply to `user` in `namespace` (for SelfSubjectRulesReview)."""
        return [
            rule
            for binding in self._bindings_of(user)
            if not binding.grant.namespace or binding.grant.namespace == namespace
            for rule in self.roles.get(binding.role, ())
        ]

    def role_rules(self, key: RoleKey) -> tuple[PolicyRule, ...] | None:
        """The rules of a stored role, None when there is no such role."""
        self._catch_up()
        return self.roles.get(key)

    def _bindings_of(self, user: UserInfo) -> Iterator[StoredBinding]:
        self._catch_up()
        seen: set[BindingKey] = set()
        for key in subject_keys(user):
            for binding_key in self.by_subject.get(key, ()):
                if binding_key not in seen:
                    seen.add(binding_key)
                    binding = self.bindings[binding_key]
                    if any(s.matches(user) for s in binding.grant.subjects):
                        yield binding

    def _catch_up(self) -> None:
        cache = self.cache
        if self.revision == cache.revision:
            return
        if self.revision < 0 or self.revision < cache.history_start:
            self._rebuild()
            self.compiled.clear()
        else:
            events = self._new_events()
            for event in events:
                self._set(event.entry, deleted=event.type == "DELETED")
            if events:
                self.compiled.clear()
        self.revision = cache.revision

    def _new_events(self) -> list[Event]:
        # One pass back over the events since the last look (every resource's: amortized one check each).
        found = []
        for event in reversed(self.cache.history):
            if event.rev <= self.revision:
                break
            if event.entry.resource in RBAC_RESOURCES:
                found.append(event)
        found.reverse()
        return found

    def _rebuild(self) -> None:
        self.roles.clear()
        self.bindings.clear()
        self.by_subject.clear()
        for resource in (*ROLE_RESOURCES, *BINDING_RESOURCES):
            for entry in self.cache.entries(resource, Filter()):
                self._set(entry, deleted=False)

    def _set(self, entry: Entry, *, deleted: bool) -> None:
        key = (entry.resource, entry.namespace, entry.name)
        if entry.resource in ROLE_RESOURCES:
            self.roles.pop(key, None)
            if not deleted:
                self.roles[key] = _role_rules(entry)
            return
        previous = self.bindings.pop(key, None)
        if previous is not None:
            for subject in previous.grant.subjects:
                keys = self.by_subject.get(_subject_key(subject.kind, subject.name, subject.namespace))
                if keys is not None:
                    keys.discard(key)
        if deleted:
            return
        binding = self._binding(entry)
        if binding is None:
            return
        self.bindings[key] = binding
        for subject in binding.grant.subjects:
            self.by_subject.setdefault(
                _subject_key(subject.kind, subject.name, subject.namespace), set()
            ).add(key)

    def _binding(self, entry: Entry) -> StoredBinding | None:
        obj = orjson.loads(entry.data)
        ref = obj.get("roleRef") or {}
        role_resource = "roles" if ref.get("kind") == "Role" else "clusterroles"
        role = (
            role_resource,
            entry.namespace if role_resource == "roles" else "",
            str(ref.get("name") or ""),
        )
        try:
            subjects = parse_subjects(_doc(entry), obj, entry.namespace)
        except PolicyError:
            return None
        source = f"{obj.get('kind')} {entry.name} -> {ref.get('kind')} {ref.get('name')}"
        return StoredBinding(Grant(source, entry.namespace, subjects, ()), role)


def _subject_key(kind: str, name: str, namespace: str) -> str:
    if kind == "ServiceAccount":
        return f"u:system:serviceaccount:{namespace}:{name}"
    return ("u:" if kind == "User" else "g:") + name


def _doc(entry: Entry) -> str:
    return f"{entry.resource} {entry.namespace + '/' if entry.namespace else ''}{entry.name}"


def _role_rules(entry: Entry) -> tuple[PolicyRule, ...]:
    try:
        return parse_rules(_doc(entry), orjson.loads(entry.data))
    except PolicyError:  # validated at write: only an object stored some other way fails here
        return ()
