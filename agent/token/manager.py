"""The token manager (the kubelet's token.Manager): bound ServiceAccount tokens for the pods of this node.

Flow of `get(namespace, account, request)`: a token cached for the same ServiceAccount and request
(audiences, lifetime, bound pod) is returned while it needs no refresh; otherwise a TokenRequest is sent
(`request_token`, a POST to `serviceaccounts/<name>/token` bound to the pod) and its answer cached. A
token needs a refresh, as the kubelet decides, once 80% of its lifetime has passed or it is 24 hours old,
each less a jitter of up to 10 s so a node's pods do not all ask at once. When the request fails, a cached
token that has not expired yet is kept (logged); with none, `TokenError` carries the reason for the
FailedMount event, and the volume manager retries with its backoff. `drop_pod(uid)` forgets a pod's
tokens when the pod goes; expired tokens are swept at most once a minute.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

MAX_TTL_S = 24 * 3600.0  # the kubelet refreshes a token a day old whatever its lifetime
REFRESH_AT = 0.8  # ... or past 80% of its lifetime
MAX_JITTER_S = 10.0
SWEEP_EVERY_S = 60.0


@dataclass(frozen=True)
class TokenSpec:
    """What a projected token asks for; bound to the pod (name and uid), as the kubelet binds it."""

    audiences: tuple[str, ...]
    expiration_seconds: int
    pod_name: str
    pod_uid: str

    def body(self) -> dict[str, Any]:
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": list(self.audiences),
                "expirationSeconds": self.expiration_seconds,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": self.pod_name,
                    "uid": self.pod_uid,
                },
            },
        }


@dataclass(frozen=True)
class IssuedToken:
    token: str
    expires: float  # unix seconds
    lifetime: float  # seconds, as issued (the server may give another than asked)


class TokenError(Exception):
    """No token for the volume; the message is the FailedMount reason."""


# (namespace, account, spec) -> the issued token; raises TokenError (or any Exception) when refused
Requester = Callable[[str, str, TokenSpec], IssuedToken]


class TokenManager:
    def __init__(
        self,
        request_token: Requester,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._request = request_token
        self._clock = clock
        self._jitter = jitter
        self._lock = threading.Lock()
        self._tokens: dict[tuple[str, str, TokenSpec], IssuedToken] = {}
        self._swept_at = float("-inf")

    def requires_refresh(self, issued: IssuedToken, now: float) -> bool:
        jitter = self._jitter() * MAX_JITTER_S
        issued_at = issued.expires - issued.lifetime
        if now > issued_at + MAX_TTL_S - jitter:
            return True
        return now > issued.expires - issued.lifetime * (1 - REFRESH_AT) - jitter

    def get(self, namespace: str, account: str, spec: TokenSpec) -> str:
        key = (namespace, account, spec)
        now = self._clock()
        self._sweep(now)
        with self._lock:
            cached = self._tokens.get(key)
        if cached is not None and not self.requires_refresh(cached, now):
            return cached.token
        try:
            issued = self._request(namespace, account, spec)
        except Exception as exc:
            if cached is not None and now < cached.expires:
                log.warning(
                    "pod %s/%s: refreshing the token of %s failed, keeping the current one: %s",
                    namespace, spec.pod_name, account, exc,
                )  # fmt: skip
                return cached.token
            raise TokenError(f"failed to fetch token: {exc}") from None
        with self._lock:
            self._tokens[key] = issued
        return issued.token

    def drop_pod(self, uid: str) -> None:
        with self._lock:
            for key in [k for k in self._tokens if k[2].pod_uid == uid]:
                del self._tokens[key]

    def _sweep(self, now: float) -> None:
        if now - self._swept_at < SWEEP_EVERY_S:
            return
        with self._lock:
            self._swept_at = now
            for key in [k for k, t in self._tokens.items() if now >= t.expires]:
                del self._tokens[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._tokens)
