"""`POST serviceaccounts/{name}/token` (TokenRequest) and the OIDC discovery documents, as kube serves them.

Flow of a TokenRequest: read the authentication.k8s.io/v1 TokenRequest; default `expirationSeconds` (1 h)
and the audiences (the API audiences); refuse a duration under 10 minutes (422); the ServiceAccount must
exist (404); a `boundObjectRef` to a Pod must name a pod that exists (404), has that uid (409) and runs
as this ServiceAccount (400), and the token then also names the pod's node. A node user passes
NodeRestriction's rule (noderestriction.token_refusal) first. The answer (201) is the TokenRequest with
`status.token` and `status.expirationTimestamp`. Nothing is stored.
`/.well-known/openid-configuration` and `/openid/v1/jwks` answer any user RBAC lets read them (kube binds
them to `system:serviceaccounts`, auth/authz.py).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from apiserver.auth import node_name_of
from apiserver.auth.noderestriction import token_refusal
from apiserver.auth.satokens import BoundObject, TokenIssuer
from apiserver.handlers.common import ApiContext, dry_run_requested, json_object, read_json
from apiserver.registry.schema import format_time
from apiserver.request import RequestInfo
from apiserver.status import APIError, bad_request, conflict, forbidden, invalid, not_found

ISSUER_KEY = "token_issuer"  # ctx.extras: the TokenIssuer (daemon.py)
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 1 << 32
GROUP = "authentication.k8s.io"


def _stored(ctx: ApiContext, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    entry = ctx.store.latest(plural, namespace, name)
    return orjson.loads(entry.data) if entry is not None else None


def _spec(body: Any, name: str) -> tuple[list[str], int, Mapping[str, Any] | None]:
    if not isinstance(body, Mapping) or body.get("kind") not in (None, "", "TokenRequest"):
        raise bad_request("the object provided is unrecognized (must be of type TokenRequest)")
    spec = body.get("spec") or {}
    audiences = [str(a) for a in spec.get("audiences") or []]
    seconds = spec.get("expirationSeconds")
    seconds = DEFAULT_EXPIRATION if seconds is None else seconds
    if not isinstance(seconds, int) or seconds < MIN_EXPIRATION or seconds > MAX_EXPIRATION:
        why = "may not specify a duration less than 10 minutes"
        if isinstance(seconds, int) and seconds > MAX_EXPIRATION:
            why = "may not specify a duration larger than 2^32 seconds"
        cause = ("spec.expirationSeconds", "FieldValueInvalid", f"Invalid value: {seconds}: {why}")
        raise invalid("TokenRequest", name, [cause], GROUP)
    ref = spec.get("boundObjectRef")
    return audiences, seconds, ref if isinstance(ref, Mapping) else None


def _bound_pod(
    ctx: ApiContext, namespace: str, account: str, ref: Mapping[str, Any]
) -> tuple[BoundObject, dict[str, Any]]:
    if ref.get("kind") != "Pod" or ref.get("apiVersion", "v1") != "v1":
        raise bad_request(
            f"cannot bind token to object of type {ref.get('kind')!r}: only v1 Pod is served here"
        )
    pod_name = str(ref.get("name") or "")
    pod = _stored(ctx, "pods", namespace, pod_name)
    if pod is None:
        raise not_found("pods", pod_name)
    uid = str(pod["metadata"].get("uid") or "")
    if ref.get("uid") and ref["uid"] != uid:
        raise conflict(
            "pods",
            pod_name,
            f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
            "The object might have been deleted and then recreated",
        )
    if (pod.get("spec") or {}).get("serviceAccountName", "default") != account:
        raise bad_request(
            f'cannot bind token for serviceaccount "{account}" '
            "to pod running with different serviceaccount name."
        )
    node_name = str((pod.get("spec") or {}).get("nodeName") or "")
    node = _stored(ctx, "nodes", "", node_name) if node_name else None
    node_uid = str((node or {}).get("metadata", {}).get("uid") or "")
    return BoundObject(pod_name, uid, node_name if node is not None else "", node_uid), pod


async def create_token(request: web.Request, ctx: ApiContext, info: RequestInfo, user: Any) -> web.Response:
    issuer: TokenIssuer | None = ctx.extras.get(ISSUER_KEY)
    if issuer is None:
        raise APIError(404, "NotFound", "the server could not find the requested resource", {})
    body = await read_json(request)
    audiences, seconds, ref = _spec(body, info.name)
    account = _stored(ctx, "serviceaccounts", info.namespace, info.name)
    if account is None:
        raise not_found("serviceaccounts", info.name)
    bound, pod = _bound_pod(ctx, info.namespace, info.name, ref) if ref is not None else (None, None)
    node = node_name_of(user) if user is not None else None
    if node is not None:
        refusal = token_refusal(node, ref, pod, audiences, issuer.api_audiences)
        if refusal:
            raise forbidden(f'serviceaccounts "{info.name}" is forbidden: {refusal}')
    audiences = audiences or list(issuer.api_audiences)
    now = ctx.clock()
    token, expires = "", int(now.timestamp()) + seconds
    if not dry_run_requested(request, info.verb):
        token, expires = issuer.issue(info.namespace, account, audiences, now, seconds, bound)
    answer = {
        "kind": "TokenRequest",
        "apiVersion": f"{GROUP}/v1",
        "metadata": {"name": info.name, "namespace": info.namespace, "creationTimestamp": None},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": ref},
        "status": {
            "token": token,
            "expirationTimestamp": format_time(datetime.datetime.fromtimestamp(expires, datetime.UTC)),
        },
    }
    return json_object(answer, 201)


def add_routes(app: web.Application, issuer: TokenIssuer) -> None:
    """The OIDC discovery documents (kube's ServiceAccountIssuerDiscovery, on by default)."""

    async def configuration(_request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(issuer.discovery_document()), content_type="application/json")

    async def jwks(_request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(issuer.jwks()), content_type="application/jwk-set+json")

    app.router.add_get("/.well-known/openid-configuration", configuration)
    app.router.add_get("/openid/v1/jwks", jwks)
