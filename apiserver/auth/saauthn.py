"""ServiceAccount token authentication, as kube's serviceaccount authenticator (its bound-token validator).

Flow of `authenticate`: a bearer token that is a JWT with our issuer is verified (signature, API audience,
expiry: satokens.py); the ServiceAccount it names must still exist with the uid in the token, and a pod it
is bound to must still exist with that uid (a pod deleted, or deleted and made again under its name,
refuses its tokens); either one whose deletionTimestamp is more than 60 s past refuses them too (kube's
leeway: a pod in its grace period, an object kept by a finalizer). The user is
`system:serviceaccount:<ns>:<name>` in kube's groups `system:serviceaccounts`,
`system:serviceaccounts:<ns>` and `system:authenticated`. Any other token goes to the static-token
authenticator (authn.py), as kube's union authenticator tries each in turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

import orjson

from apiserver.auth import AUTHENTICATED_GROUP, UserInfo
from apiserver.auth.satokens import KUBE_CLAIM, SA_USER_PREFIX, InvalidToken, TokenIssuer

log = logging.getLogger(__name__)

SERVICEACCOUNTS_GROUP = "system:serviceaccounts"
DELETED_LEEWAY = timedelta(seconds=60)  # kube's jwt.DefaultLeeway

# (plural, namespace, name) -> the stored object, or None
Lookup = Callable[[str, str, str], Mapping[str, Any] | None]


class Authenticator(Protocol):
    def authenticate(self, authorization_header: str | None) -> UserInfo | None: ...


def service_account_user(namespace: str, name: str, uid: str) -> UserInfo:
    groups = (SERVICEACCOUNTS_GROUP, f"{SERVICEACCOUNTS_GROUP}:{namespace}", AUTHENTICATED_GROUP)
    return UserInfo(f"{SA_USER_PREFIX}{namespace}:{name}", uid, groups)


def store_lookup(store: Any) -> Lookup:
    """Objects read from the watch cache (the newest stored state, as kube reads them from its informers)."""

    def lookup(plural: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        entry = store.latest(plural, namespace, name)
        if entry is None:
            return None
        obj: Mapping[str, Any] = orjson.loads(entry.data)
        return obj

    return lookup


def _uid(obj: Mapping[str, Any] | None) -> str | None:
    if obj is None:
        return None
    return str((obj.get("metadata") or {}).get("uid") or "")


class ServiceAccountAuthenticator:
    def __init__(
        self, issuer: TokenIssuer, lookup: Lookup, fallback: Authenticator, clock: Callable[[], datetime]
    ) -> None:
        self.issuer = issuer
        self._lookup = lookup
        self._fallback = fallback
        self._clock = clock

    def authenticate(self, authorization_header: str | None) -> UserInfo | None:
        if not authorization_header:
            return None
        scheme, _, token = authorization_header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not self.issuer.looks_like_ours(token):
            return self._fallback.authenticate(authorization_header)
        try:
            return self._validate(token)
        except InvalidToken as exc:
            log.info("service account token refused: %s", exc)
            return None

    def _validate(self, token: str) -> UserInfo:
        claims = self.issuer.verify(token, self._clock())
        private = claims[KUBE_CLAIM]
        namespace = str(private.get("namespace") or "")
        account = private.get("serviceaccount") or {}
        name, uid = str(account.get("name") or ""), str(account.get("uid") or "")
        if claims.get("sub") != f"{SA_USER_PREFIX}{namespace}:{name}":
            raise InvalidToken("the subject does not match the kubernetes.io claim")
        now = self._clock()
        stored = self._lookup("serviceaccounts", namespace, name)
        stored_uid = _uid(stored)
        if stored_uid is None:
            raise InvalidToken(f"serviceaccounts {namespace}/{name} not found")
        if stored_uid != uid:
            raise InvalidToken(f"serviceaccounts {namespace}/{name} has uid {stored_uid}, not {uid}")
        if _deleted_before(stored, now):
            raise InvalidToken(f"service account {namespace}/{name} has been deleted")
        pod = private.get("pod")
        if isinstance(pod, dict):
            bound = self._lookup("pods", namespace, str(pod.get("name") or ""))
            pod_uid = _uid(bound)
            if pod_uid is None:
                raise InvalidToken(f"pods {namespace}/{pod.get('name')} not found")
            if pod_uid != pod.get("uid"):
                raise InvalidToken(
                    f"pods {namespace}/{pod.get('name')} has uid {pod_uid}, not {pod.get('uid')}"
                )
            if _deleted_before(bound, now):
                raise InvalidToken("service account token has been invalidated")  # kube: the pod is going
        return service_account_user(namespace, name, uid)


def _deleted_before(obj: Mapping[str, Any] | None, now: datetime) -> bool:
    """kube's claims.go: an object whose deletionTimestamp is more than the JWT leeway (60 s) past
    invalidates the tokens bound to it, though it is still stored (finalizers, a pod's grace period)."""
    stamp = str(((obj or {}).get("metadata") or {}).get("deletionTimestamp") or "")
    if not stamp:
        return False
    try:
        deleted = datetime.fromisoformat(stamp)
    except ValueError:
        return False
    return deleted < now - DELETED_LEEWAY
