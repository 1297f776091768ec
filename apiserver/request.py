"""`RequestInfo` from method + path + query, as kube's RequestInfoFactory derives it.

Authorization (RBAC, the Node authorizer) and routing both read it, so both agree on what
a request is: `GET /api/v1/namespaces/a/pods?watch=1` is verb `watch` on `pods` in `a`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

CONNECT_SUBRESOURCES = ("exec", "attach", "portforward")
_VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class RequestInfo(NamedTuple):
    """Immutable, as a frozen dataclass would be, but built ~5x cheaper (every request makes one)."""

    is_resource_request: bool
    path: str
    verb: str  # get|list|watch|create|update|patch|delete|deletecollection, or the lower-case method
    api_group: str
    api_version: str
    namespace: str
    resource: str
    subresource: str
    name: str


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


def request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """Classify one request; a non-resource path (`/healthz`, `/api`) gets is_resource_request False."""
    method = method.upper()
    parts = path.strip("/").split("/")
    if "" in parts:
        parts = [p for p in parts if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return _plain(method, path)
    watch_prefix = rest[0] == "watch"
    if watch_prefix:  # deprecated /api/v1/watch/... form
        rest = rest[1:]
        if not rest:
            return _plain(method, path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 2:
        namespace = rest[1]
        if len(rest) == 2 or (len(rest) == 3 and rest[2] in ("status", "finalize")):
            # namespaces/{name}[/status]: the namespace object itself
            rest = ["namespaces", rest[1], *rest[2:]]
        else:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 else ""
    if len(rest) > 3:
        return _plain(method, path)
    if method in ("GET", "HEAD"):
        verb = "watch" if watch_prefix or _truthy(query.get("watch")) else "get" if name else "list"
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    else:
        verb = _VERB_BY_METHOD.get(method, method.lower())
    if resource == "pods" and subresource in CONNECT_SUBRESOURCES:
        # A WebSocket upgrade is a GET, but it runs a command: authorized as create, as kube-apiserver 1.35+
        # does (AuthorizePodWebsocketUpgradeCreatePermission), and as the SPDY POST always was.
        verb = "create"
    if not name and verb in ("list", "watch", "deletecollection"):
        name = _name_from_field_selector(query.get("fieldSelector"))
    return RequestInfo(True, path, verb, group, version, namespace, resource, subresource, name)


def _plain(method: str, path: str) -> RequestInfo:
    return RequestInfo(False, path, method.lower(), "", "", "", "", "", "")


def _name_from_field_selector(selector: str | None) -> str:
    """kube names a collection request by its `metadata.name=x` field selector (a kubelet's watch of one
    Secret), so the Node authorizer and resourceNames rules judge that one object."""
    for term in (selector or "").split(","):
        field, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and not field.endswith("!") and field.strip() == "metadata.name":
            return value.strip()
    return ""
