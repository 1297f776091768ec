"""Kubernetes `Status` error objects, as apimachinery's `errors` package builds them.

Every failure the server answers is an `APIError` carrying a `Status` body with the real
`reason`, `code` and message text, so kubectl and the Python client print what they print
against kube-apiserver (`pods "x" not found`, `Operation cannot be fulfilled on ...`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def api_error(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A failure `Status` body."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:  # kube sends `"details":{}` on a bare 404; kubectl debug dereferences it
        body["details"] = dict(details)
    return body


def success_status(code: int = 200, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = dict(details)
    body["code"] = code
    return body


class APIError(Exception):
    """An error answered as a Status; `status` is the body, `code` the HTTP status."""

    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.status = api_error(code, reason, message, details)


def _details(name: str, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    details.update({k: v for k, v in extra.items() if v})
    return details


def qualified(resource: str, group: str) -> str:
    """kube's GroupResource.String(): `pods`, `leases.coordination.k8s.io`."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> APIError:
    return APIError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found', _details(name, group, resource)
    )


def already_exists(resource: str, name: str, group: str = "") -> APIError:
    return APIError(
        409,
        "AlreadyExists",
        f'{qualified(resource, group)} "{name}" already exists',
        _details(name, group, resource),
    )


def conflict(resource: str, name: str, why: str, group: str = "") -> APIError:
    return APIError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        _details(name, group, resource),
    )


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, name: str, causes: Sequence[tuple[str, str, str]], group: str = "") -> APIError:
    """422 Invalid; each cause is (field, reason such as FieldValueInvalid, message)."""
    texts = [f"{field}: {message}" if field else message for field, _, message in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    qualified_kind = f"{kind}.{group}" if group else kind
    return APIError(
        422,
        "Invalid",
        f'{qualified_kind} "{name}" is invalid: {joined}',
        _details(
            name,
            group,
            kind,
            causes=[
                {"reason": reason, "message": message, "field": field} for field, reason, message in causes
            ],
        ),
    )


def bad_request(message: str) -> APIError:
    return APIError(400, "BadRequest", message)


def forbidden(message: str) -> APIError:
    return APIError(403, "Forbidden", message)


def method_not_allowed(message: str) -> APIError:
    return APIError(405, "MethodNotAllowed", message)


def gone(message: str) -> APIError:
    return APIError(410, "Expired", message)


def too_large(message: str = "Request entity too large: limit is 3145728") -> APIError:
    return APIError(413, "RequestEntityTooLarge", message)


def unsupported_media_type(content_type: str) -> APIError:
    return APIError(
        415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}"
    )


def not_acceptable(accept: str) -> APIError:
    return APIError(
        406, "NotAcceptable", f"only the following media types are accepted: application/json ({accept})"
    )


def internal(message: str) -> APIError:
    return APIError(500, "InternalError", f"Internal error occurred: {message}")


def unavailable(message: str) -> APIError:
    return APIError(503, "ServiceUnavailable", message)
