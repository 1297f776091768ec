"""Typed errors: an API error carries the HTTP code and the Status reason; a transport error has neither."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KubeError(Exception):
    """Anything that went wrong talking to the API server."""


class KubeConfigError(KubeError):
    """The kubeconfig (or in-cluster config) cannot be used."""


class TransportError(KubeError):
    """No HTTP answer: connection refused or reset, timeout, TLS failure. Always worth retrying."""


class ApiError(KubeError):
    """An HTTP answer other than 2xx; `status` is the decoded Status object (or {})."""

    def __init__(self, code: int, reason: str, message: str, status: Mapping[str, Any] | None = None) -> None:
        self.code = code
        self.reason = reason
        self.message = message
        self.status: Mapping[str, Any] = status or {}
        super().__init__(f"{code} {reason}: {message}" if reason else f"{code}: {message}")


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    """409: a stale resourceVersion, a failed precondition, or (subclass) AlreadyExists."""


class AlreadyExists(Conflict):
    pass


class Gone(ApiError):
    """410: a resourceVersion or continue token too old (relist)."""


class Forbidden(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Invalid(ApiError):
    pass


def api_error(code: int, status: Mapping[str, Any] | None, fallback: str) -> ApiError:
    status = status if isinstance(status, Mapping) else {}
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or fallback)
    cls: type[ApiError] = ApiError
    if code == 404:
        cls = NotFound
    elif code == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif code == 410:
        cls = Gone
    elif code == 403:
        cls = Forbidden
    elif code == 401:
        cls = Unauthorized
    elif code == 422:
        cls = Invalid
    return cls(code, reason, message, status)


def is_retryable(exc: BaseException) -> bool:
    """Transport failures, 429 and 5xx are worth another try as they are; other API errors are not
    (a conflict needs a fresh read first)."""
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, ApiError) and (exc.code == 429 or exc.code >= 500)
