"""Who may call the authenticated daemon endpoint, and for what: the kubelet's server/auth.go.

    the TLS client certificate, verified against the cluster CA (the kubelet's --client-ca-file; none ->
    401) -> the user (CN) and groups (O) -> the request's attributes (`attributes`): verb from the
    method, resource `nodes`, name this node, subresource from the path (stats, metrics, log, pods,
    otherwise proxy) -> a SubjectAccessReview to the API server (the kubelet's webhook authorizer; 403
    with its reason when denied) -> the handler.

Answers are cached as the kubelet caches them (authorized 5 minutes, unauthorized 30 seconds), so an exec
does not pay a review round trip each time. Exec, attach and port-forward are authorized as `create`
whatever the method, since a WebSocket upgrade is a GET that still runs a command.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

AUTHORIZED_TTL_S = 300.0
UNAUTHORIZED_TTL_S = 30.0
_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_SUBRESOURCES = {"stats": "stats", "metrics": "metrics", "logs": "log", "pods": "pods"}
_CONNECT = ("exec", "attach", "portForward", "run")


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class Attributes:
    verb: str
    subresource: str


def identity_of(peercert: Mapping[str, Any] | None) -> Identity | None:
    """The user and groups of a verified client certificate (ssl's getpeercert() form), or None."""
    if not peercert:
        return None
    names: list[str] = []
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                names.append(value)
            elif key == "organizationName":
                groups.append(value)
    return Identity(names[0], tuple(groups)) if names else None


def attributes(method: str, path: str) -> Attributes:
    first = path.strip("/").split("/", 1)[0]
    verb = "create" if first in _CONNECT else _VERBS.get(method.upper(), method.lower())
    return Attributes(verb, _SUBRESOURCES.get(first, "proxy"))


# (user, groups, verb, subresource) -> (allowed, reason): the API server's SubjectAccessReview answer.
Review = Callable[[Identity, Attributes], tuple[bool, str]]


class Authorizer:
    """Cached SubjectAccessReviews for one node."""

    def __init__(self, review: Review, clock: Callable[[], float] = time.monotonic) -> None:
        self._review = review
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[Identity, Attributes], tuple[float, bool, str]] = {}

    def decide(self, who: Identity, what: Attributes) -> tuple[bool, str]:
        key = (who, what)
        now = self._clock()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached[0] > now:
                return cached[1], cached[2]
        allowed, reason = self._review(who, what)
        with self._lock:
            if len(self._cache) > 1024:
                self._cache.clear()
            ttl = AUTHORIZED_TTL_S if allowed else UNAUTHORIZED_TTL_S
            self._cache[key] = (now + ttl, allowed, reason)
        return allowed, reason


def forbidden(who: Identity, what: Attributes, node: str, reason: str) -> str:
    """The kubelet's message for a denied request."""
    text = (
        f"Forbidden (user={who.user}, verb={what.verb}, resource=nodes, subresource={what.subresource})"
        f" on node {node}"
    )
    return f"{text}: {reason}" if reason else text


def subject_access_review(client: Any, node: str) -> Review:
    """The review through the agent's API client (kubenode.kubeclient)."""
    from kubenode.kubeclient import KubeError
    from kubenode.kubeclient.client import Resource

    resource = Resource(
        "subjectaccessreviews", "SubjectAccessReview", group="authorization.k8s.io", namespaced=False
    )

    def review(who: Identity, what: Attributes) -> tuple[bool, str]:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": who.user,
                "groups": list(who.groups),
                "resourceAttributes": {
                    "verb": what.verb,
                    "resource": "nodes",
                    "subresource": what.subresource,
                    "name": node,
                },
            },
        }
        try:
            answer = client.create(resource, body)
        except KubeError as exc:
            return False, f"cannot ask the API server: {exc}"
        answer_status = answer.get("status") or {}
        return bool(answer_status.get("allowed")), str(answer_status.get("reason", ""))

    return review
