"""SelfSubject{Access,Rules}Review and SelfSubjectReview: what `kubectl auth can-i [--list]` and `whoami` ask;
SubjectAccessReview: what an agent asks before it serves its daemon endpoint (logs, exec, port-forward).

Both are create-only, never stored: the answer comes from the caller's own UserInfo (set by the request
middleware) and the server's authorizer, as kube-apiserver's authorization/authentication registries do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from aiohttp import web

from apiserver import protobody
from apiserver.auth import UserInfo
from apiserver.auth.authz import rules_for
from apiserver.request import RequestInfo
from apiserver.resources import ResourceInfo
from apiserver.status import api_error

ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
RULES_REVIEW_PATH = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
SELF_REVIEW_PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
# What an agent asks to authorize a request to its daemon endpoint (the kubelet's webhook authorizer).
SUBJECT_ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def attributes_to_info(spec: dict[str, Any]) -> RequestInfo:
    """kube's ResourceAttributes / NonResourceAttributes as the RequestInfo the authorizer judges."""
    resource = spec.get("resourceAttributes")
    if isinstance(resource, dict):
        return RequestInfo(
            True,
            "",
            str(resource.get("verb", "")),
            str(resource.get("group", "")),
            str(resource.get("version", "")),
            str(resource.get("namespace", "")),
            str(resource.get("resource", "")),
            str(resource.get("subresource", "")),
            str(resource.get("name", "")),
        )
    other = spec.get("nonResourceAttributes") or {}
    return RequestInfo(False, str(other.get("path", "")), str(other.get("verb", "")), "", "", "", "", "", "")


def reply(body: dict[str, Any], code: int = 201) -> web.Response:
    return web.Response(status=code, body=orjson.dumps(body), content_type="application/json")


def _check_dry_run(request: web.Request) -> None:
    """A review stores nothing, so dryRun=All changes nothing; another value is kube's 422 as on a create."""
    from apiserver.handlers.common import dry_run_requested

    dry_run_requested(request, "create")


async def body_of(request: web.Request) -> dict[str, Any] | None:
    _check_dry_run(request)
    raw = await request.read()
    try:
        if request.content_type == protobody.MEDIA_TYPE:  # kubectl's typed client sends nothing else
            return protobody.decode(raw)
        body = orjson.loads(raw)
    except (orjson.JSONDecodeError, ValueError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def add_routes(app: web.Application, resources: Sequence[ResourceInfo]) -> None:
    async def access_review(request: web.Request) -> web.Response:
        from apiserver.handlers.app import AUTHORIZER

        user: UserInfo | None = request.get("user")
        body = await body_of(request)
        spec = (body or {}).get("spec")
        if user is None or not isinstance(spec, dict):
            return reply(api_error(400, "BadRequest", "a SelfSubjectAccessReview needs a spec"), 400)
        authorizer = request.app.get(AUTHORIZER)
        decision = authorizer.authorize(user, attributes_to_info(spec)) if authorizer is not None else None
        # kube's RBAC gives no reason for a rule that simply does not match, so kubectl prints a bare "no".
        status: dict[str, Any] = {"allowed": decision is None or decision.allowed}
        return reply({"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                       "metadata": {"creationTimestamp": None}, "spec": spec, "status": status})  # fmt: skip

    async def subject_access_review(request: web.Request) -> web.Response:
        from apiserver.handlers.app import AUTHORIZER

        body = await body_of(request)
        spec = (body or {}).get("spec")
        if not isinstance(spec, dict) or not spec.get("user"):
            return reply(api_error(400, "BadRequest", "a SubjectAccessReview needs spec.user"), 400)
        subject = UserInfo(
            str(spec["user"]), str(spec.get("uid", "")), tuple(map(str, spec.get("groups") or []))
        )
        authorizer = request.app.get(AUTHORIZER)
        decision = authorizer.authorize(subject, attributes_to_info(spec)) if authorizer is not None else None
        status: dict[str, Any] = {"allowed": decision is None or decision.allowed}
        if decision is not None and not decision.allowed:
            status["reason"] = decision.message
        return reply({"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                      "metadata": {"creationTimestamp": None}, "spec": spec, "status": status})  # fmt: skip

    async def self_review(request: web.Request) -> web.Response:
        user: UserInfo | None = request.get("user")
        _check_dry_run(request)
        if user is None:
            return reply(api_error(401, "Unauthorized", "Unauthorized"), 401)
        info: dict[str, Any] = {"username": user.name, "uid": user.uid, "groups": list(user.groups)}
        if user.extra:
            info["extra"] = {key: list(values) for key, values in user.extra}
        return reply({"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                       "metadata": {"creationTimestamp": None}, "status": {"userInfo": info}})  # fmt: skip

    async def rules_review(request: web.Request) -> web.Response:
        from apiserver.handlers.app import AUTHORIZER

        user: UserInfo | None = request.get("user")
        body = await body_of(request)
        spec = (body or {}).get("spec")
        if user is None or not isinstance(spec, dict):
            return reply(api_error(400, "BadRequest", "a SelfSubjectRulesReview needs a spec"), 400)
        rules = rules_for(request.app.get(AUTHORIZER), user, str(spec.get("namespace", "")))
        status = {
            "resourceRules": [
                {"verbs": sorted(r.verbs), "apiGroups": sorted(r.groups), "resources": sorted(r.resources)}
                for r in rules
                if r.resources
            ],
            "nonResourceRules": [
                {"verbs": sorted(r.verbs), "nonResourceURLs": list(r.urls)} for r in rules if r.urls
            ],
            "incomplete": False,
        }
        return reply({"kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1",
                       "metadata": {"creationTimestamp": None}, "spec": spec, "status": status})  # fmt: skip

    app.router.add_post(ACCESS_REVIEW_PATH, access_review)
    app.router.add_post(RULES_REVIEW_PATH, rules_review)
    app.router.add_post(SELF_REVIEW_PATH, self_review)
    app.router.add_post(SUBJECT_ACCESS_REVIEW_PATH, subject_access_review)
