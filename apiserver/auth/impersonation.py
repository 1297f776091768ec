"""Impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-<key>`), as kube-apiserver's
filters/impersonation does it (`kubectl --as`, `--as-group`, `--as-uid`).

    headers -> one request per thing asked for: a user (a `system:serviceaccount:<ns>:<name>` one is the
    ServiceAccount), each group, each extra value, the uid -> groups, extras or a uid without a user:
    400 `requested [...] without impersonating a user` -> for each, the requester needs verb
    `impersonate` on users/<name>, groups/<name>, serviceaccounts/<name> in <ns>, userextras/<key> (name:
    the value) or uids/<uid> in API group "" (authentication.k8s.io for userextras and uids), else 403
    with kube's forbidden text -> the request goes on as the impersonated user: its name, the groups
    asked for (a ServiceAccount's own groups when none are), system:authenticated added, the extras and
    uid asked for. Authorization, admission (NodeRestriction) and the reviews all see that user.
"""

from __future__ import annotations

from urllib.parse import unquote

from multidict import CIMultiDictProxy

from apiserver.auth import AUTHENTICATED_GROUP, UserInfo
from apiserver.auth.authz import Authorizer, forbidden_message
from apiserver.request import RequestInfo
from apiserver.status import APIError

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"
SA_PREFIX = "system:serviceaccount:"
UNAUTHENTICATED_GROUP = "system:unauthenticated"


def _requests(headers: CIMultiDictProxy[str]) -> list[tuple[str, str, str, str]]:
    """What is asked for, in kube's order: (kind, namespace, name, extra key)."""
    asked: list[tuple[str, str, str, str]] = []
    user = headers.get(USER_HEADER, "")
    if user:
        parts = user[len(SA_PREFIX) :].split(":") if user.startswith(SA_PREFIX) else []
        if len(parts) == 2 and all(parts):
            asked.append(("ServiceAccount", parts[0], parts[1], ""))
        else:
            asked.append(("User", "", user, ""))
    asked += [("Group", "", g, "") for g in headers.getall(GROUP_HEADER, [])]
    for key, value in headers.items():
        if key.lower().startswith(EXTRA_PREFIX):
            asked.append(("UserExtra", "", value, unquote(key[len(EXTRA_PREFIX) :].lower())))
    uid = headers.get(UID_HEADER, "")
    if uid:
        asked.append(("UID", "", uid, ""))
    if asked and not user:
        shown = " ".join(f"{{{kind} {ns} {name} {key}}}" for kind, ns, name, key in asked)
        raise APIError(400, "BadRequest", f"requested [{shown}] without impersonating a user")
    return asked


def impersonate(
    headers: CIMultiDictProxy[str], requester: UserInfo, authorizer: Authorizer | None
) -> UserInfo:
    """The user the request is made as: `requester`, or whom it impersonates (403 if not allowed)."""
    asked = _requests(headers)
    if not asked:
        return requester
    groups_given = any(kind == "Group" for kind, *_ in asked)
    name, uid = "", ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for kind, namespace, value, key in asked:
        group, resource, subresource = "", "", ""
        if kind == "ServiceAccount":
            resource = "serviceaccounts"
            name = f"{SA_PREFIX}{namespace}:{value}"
            if not groups_given:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
        elif kind == "User":
            resource, name = "users", value
        elif kind == "Group":
            resource = "groups"
            groups.append(value)
        elif kind == "UserExtra":
            group, resource, subresource = "authentication.k8s.io", "userextras", key
            extra.setdefault(key, []).append(value)
        else:
            group, resource, uid = "authentication.k8s.io", "uids", value
        version = "v1" if group else ""
        info = RequestInfo(True, "", "impersonate", group, version, namespace, resource, subresource, value)
        if authorizer is not None:
            decision = authorizer.authorize(requester, info)
            if not decision.allowed:
                message = decision.message or forbidden_message(requester, info)
                raise APIError(403, "Forbidden", message)
    if name == "system:anonymous":
        if UNAUTHENTICATED_GROUP not in groups:
            groups.append(UNAUTHENTICATED_GROUP)
    elif AUTHENTICATED_GROUP not in groups and UNAUTHENTICATED_GROUP not in groups:
        groups.append(AUTHENTICATED_GROUP)
    return UserInfo(name, uid, tuple(groups), tuple((k, tuple(v)) for k, v in extra.items()))
