"""The aiohttp application: middleware chain, routes, health checks.

Middleware order, as kube-apiserver's handler chain: time the request (metrics), authenticate
(401, except the health checks and /version), derive the RequestInfo, authorize (403), then the
handler; every APIError becomes its Status body, anything unexpected a 500 Status. What aiohttp refuses
before the app sees it (request line or headers too long, malformed HTTP) is answered as a Status by
handlers/httperrors.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from apiserver import protobody, protoencode
from apiserver.handlers import nodemetrics
from apiserver.handlers.common import CONTEXT, METRICS, ApiContext, error_response, optional_module
from apiserver.handlers.rest import dispatch
from apiserver.request import request_info
from apiserver.resources import METRICS_API, SERVED
from apiserver.status import APIError, bad_request, internal, unavailable
from apiserver.storage.log import StorageBroken

log = logging.getLogger(__name__)

PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
AUTHENTICATOR: web.AppKey[Any] = web.AppKey("authenticator", object)
AUTHORIZER: web.AppKey[Any] = web.AppKey("authorizer", object)


_metrics = METRICS


def _public(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PUBLIC_PATHS)


@web.middleware
async def api_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    # handlers/fasthttp.py derived it already to choose its path; under aiohttp a request has none yet.
    info = request.get("info") or request_info(request.method, request.path, request.query)
    code = 500
    try:
        user = None
        authenticator = request.app.get(AUTHENTICATOR)
        # A resource path is never one of the public ones: only other paths need the check.
        if authenticator is not None and (info.is_resource_request or not _public(request.path)):
            user = authenticator.authenticate(request.headers.get("Authorization"))
            if user is None:
                raise APIError(401, "Unauthorized", "Unauthorized")
            authorizer = request.app.get(AUTHORIZER)
            if any(key[:12].lower() == "impersonate-" for key in request.headers):
                from apiserver.auth.impersonation import impersonate  # kube's WithImpersonation

                user = impersonate(request.headers, user, authorizer)
            if authorizer is not None:
                decision = authorizer.authorize(user, info)
                if not decision.allowed:
                    raise APIError(403, "Forbidden", decision.message)
        request["user"] = user
        request["info"] = info
        response = await handler(request)
        code = response.status
        if info.is_resource_request and code < 300 and isinstance(response, web.Response):
            return _as_protobuf(request, response)
        return response
    except APIError as exc:
        code = exc.code
        return error_response(exc)
    except StorageBroken as exc:
        code = 503
        return error_response(unavailable(str(exc)))
    except (HttpProcessingError, RequestPayloadError) as exc:  # a body aiohttp could not read
        code = 400  # (bad chunking, a Content-Encoding that does not decode)
        reason = exc.message if isinstance(exc, HttpProcessingError) else " ".join(str(exc).split())
        return error_response(bad_request(f"the request body could not be read: {reason}"))
    except web.HTTPException as exc:
        code = exc.status
        if exc.status == 404:
            return error_response(
                APIError(404, "NotFound", "the server could not find the requested resource", {})
            )
        if exc.status == 405:
            return error_response(
                APIError(
                    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
                )
            )
        if exc.status < 400:
            raise  # redirects and the like are not errors
        return error_response(APIError(exc.status, exc.reason.replace(" ", ""), exc.reason))
    except Exception as exc:
        log.exception("%s %s failed", request.method, request.path)
        return error_response(internal(str(exc)))
    finally:
        if _metrics is not None and info.is_resource_request:
            try:
                _metrics.observe_request(
                    info.verb, info.resource, info.subresource, code, time.perf_counter() - started
                )
            except Exception:
                log.debug("metrics failed", exc_info=True)


def _as_protobuf(request: web.Request, response: web.Response) -> web.Response:
    """A JSON object answered as protobuf where the client asks that first (Go components: `Accept:
    application/vnd.kubernetes.protobuf, */*`), as kube-apiserver serves every built-in kind."""
    if response.content_type != "application/json" or not isinstance(response.body, bytes):
        return response
    if not protoencode.wants_protobuf(request.headers.get("Accept", "")):
        return response
    try:
        encoded = protoencode.encode_object(orjson.loads(response.body))
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
        log.exception("protobuf encoding of %s %s failed; answered as JSON", request.method, request.path)
        return response
    if encoded is None:
        return response  # a kind without a table: JSON, which the client's */* admits
    headers = {
        k: v for k, v in response.headers.items() if k.lower() not in ("content-type", "content-length")
    }
    return web.Response(
        body=encoded, status=response.status, headers=headers, content_type=protobody.MEDIA_TYPE
    )


async def resource_handler(request: web.Request) -> web.StreamResponse:
    info = request["info"]
    if not info.is_resource_request:
        raise APIError(404, "NotFound", "the server could not find the requested resource", {})
    return await dispatch(request, info, request["user"])


async def fast_handle(request: Any) -> web.StreamResponse:
    """A unary resource request from handlers/fasthttp.py (a FastRequest): the same chain as under aiohttp."""
    return await api_middleware(request, resource_handler)


def _health(ready_check: bool) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        ctx = request.app[CONTEXT]
        checks = [("ping", True), ("etcd", ctx.store.broken is None)]
        if ready_check:
            checks.append(("informer-sync", True))
        ok = all(passed for _, passed in checks)
        if "verbose" in request.query:
            lines = [
                f"[+]{name} ok" if passed else f"[-]{name} failed: reason withheld" for name, passed in checks
            ]
            lines.append(f"{request.path.strip('/')} check {'passed' if ok else 'failed'}")
            text = "\n".join(lines) + "\n"
        else:
            text = (
                "ok" if ok else f"[-]etcd failed: reason withheld\n{request.path.strip('/')} check failed\n"
            )
        return web.Response(text=text, status=200 if ok else 500, content_type="text/plain")

    return handler


def build_app(ctx: ApiContext, authenticator: Any = None, authorizer: Any = None) -> web.Application:
    # Bodies are capped at 3 MiB by read_json (with a 413 Status); aiohttp's own cap sits above it.
    app = web.Application(middlewares=[api_middleware], client_max_size=8 * 1024 * 1024)
    app[CONTEXT] = ctx
    if authenticator is not None:
        app[AUTHENTICATOR] = authenticator
    if authorizer is not None:
        app[AUTHORIZER] = authorizer
    for path, ready in (("/healthz", False), ("/livez", False), ("/readyz", True)):
        app.router.add_get(path, _health(ready))
        app.router.add_get(path + "/{check:.*}", _health(ready))
    for name in (
        "apiserver.discovery",
        "apiserver.openapi",
        "apiserver.metrics",
        "apiserver.auth.reviews",
        "apiserver.auth.certificates",
    ):
        module = optional_module(name)
        if module is not None:
            module.add_routes(app, (*SERVED, *METRICS_API) if name == "apiserver.discovery" else SERVED)
    nodemetrics.add_routes(app, METRICS_API)  # before the generic routes below, which would 404 it
    app.router.add_route("*", "/api/v1/{tail:.+}", resource_handler)
    app.router.add_route("*", "/apis/{group}/{version}/{tail:.+}", resource_handler)
    return app
