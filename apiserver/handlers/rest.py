"""REST verbs on the served resources: get, list, create, update, patch (watch, delete and the
subresources have their own modules). `dispatch` routes a parsed RequestInfo to a verb.

Reads come from the watch cache as stored bytes: a get returns the object's JSON as stored,
a list joins the matching objects' JSON, so neither decodes an object unless Table output
(kubectl get) is asked for.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Sequence
from typing import Any

import orjson
from aiohttp import web

from apiserver.handlers import deletes, podconnect, podlogs, scale, subresources, tokenrequest, watch
from apiserver.handlers.common import (
    CONTEXT,
    OPTIONS_KIND,
    ApiContext,
    dry_run_requested,
    json_bytes,
    json_object,
    list_filter,
    metadata_requested,
    partial_object,
    query_int,
    query_resource_version,
    read_json,
    strict_fields,
    table_requested,
    to_table,
    warning_headers,
)
from apiserver.handlers.writes import admit, latest_or_404, load, store_update
from apiserver.patch import APPLY_PATCH, apply_patch
from apiserver.registry import Strategy
from apiserver.request import CONNECT_SUBRESOURCES, RequestInfo
from apiserver.resources import lookup
from apiserver.status import (
    APIError,
    already_exists,
    bad_request,
    gone,
    method_not_allowed,
    not_found,
)
from apiserver.storage.cache import Entry

GENERATE_NAME_TRIES = 8


def _not_served() -> APIError:
    return APIError(404, "NotFound", "the server could not find the requested resource", {})


async def dispatch(request: web.Request, info: RequestInfo, user: Any) -> web.StreamResponse:
    ctx = request.app[CONTEXT]
    resource = lookup(info.api_group, info.api_version, info.resource)
    if resource is None or (info.namespace and not resource.namespaced and resource.plural != "namespaces"):
        raise _not_served()
    if resource.plural == "bindings":
        if info.verb != "create" or info.name:
            raise method_not_allowed(f"{info.verb} is not supported on bindings")
        dry_run_requested(request, info.verb)
        return await subresources.legacy_binding(request, ctx, info, user)
    strategy = ctx.strategies[resource.plural]
    if resource.namespaced and not info.namespace and info.verb not in ("list", "watch"):
        raise _not_served()  # only lists and watches span namespaces (/api/v1/pods)
    namespace = info.namespace if resource.namespaced else ""
    if info.verb in OPTIONS_KIND:
        dry_run_requested(request, info.verb)  # an unsupported dryRun value is refused before anything else
    if resource.group == "events.k8s.io":  # the core Events, converted (eventsv1.py)
        from apiserver.handlers import eventsv1

        return await eventsv1.serve(request, ctx, strategy, info, user, namespace)
    if info.subresource:
        sub = resource.subresource(info.subresource)
        if sub is None:
            raise _not_served()
        if info.verb not in sub.verbs:
            raise method_not_allowed("the server does not allow this method on the requested resource")
        if sub.name == "binding":
            return await subresources.binding(request, ctx, strategy, info, user)
        if sub.name == "eviction":
            return await subresources.eviction(request, ctx, strategy, info, user)
        if sub.name == "token":
            return await tokenrequest.create_token(request, ctx, info, user)
        if sub.name == "scale":
            return await scale.serve(request, ctx, strategy, info, user, namespace)
        if sub.name == "log":
            return await podlogs.pod_log(request, ctx, info)
        if sub.name in CONNECT_SUBRESOURCES:
            return await podconnect.connect(request, ctx, info)
    verb = info.verb
    if verb in ("get", "list") and "resourceVersion" in request.query:
        await _wait_for_revision(ctx, query_resource_version(request))
    if verb == "get":
        return get(request, ctx, strategy, namespace, info.name)
    if verb == "list":
        return list_(request, ctx, strategy, namespace)
    if verb == "watch":
        return await watch.serve(request, ctx, strategy, namespace, info.name)
    if verb == "create":
        if info.name and resource.plural != "namespaces":
            raise method_not_allowed("the server does not allow this method on the requested resource")
        return await create(request, ctx, strategy, info, user, namespace)
    if verb == "update":
        return await update(request, ctx, strategy, info, user, namespace)
    if verb == "patch":
        return await patch(request, ctx, strategy, info, user, namespace)
    if verb == "delete":
        return await deletes.delete(request, ctx, strategy, info, user, namespace)
    if verb == "deletecollection":
        return await deletes.delete_collection(request, ctx, strategy, info, user, namespace)
    raise method_not_allowed(f"{verb} is not supported")


# -- reads --------------------------------------------------------------------------------------------------

TOO_LARGE_WAIT_S = 3.0  # kube's watch cache waits this long for a resourceVersion it has not seen


async def _wait_for_revision(ctx: ApiContext, wanted: int) -> None:
    """A get or list at a resourceVersion newer than the store's: wait for it as kube's watch cache does
    (3 s), then kube's 504 `Too large resource version` (NotOlderThan and Exact alike)."""
    if wanted <= ctx.store.revision:
        return
    deadline = time.monotonic() + TOO_LARGE_WAIT_S
    while ctx.store.revision < wanted and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if ctx.store.revision < wanted:
        details = {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                   "retryAfterSeconds": 1}  # fmt: skip
        message = f"Timeout: Too large resource version: {wanted}, current: {ctx.store.revision}"
        raise APIError(504, "Timeout", message, details)


def get(request: web.Request, ctx: ApiContext, strategy: Strategy, namespace: str, name: str) -> web.Response:
    resource = strategy.info
    query_resource_version(request)  # validated; any stored version is at least as new as one we served
    entry = ctx.store.get(resource.plural, namespace, name)
    if entry is None:
        raise not_found(resource.plural, name, resource.group)
    if table_requested(request):
        return json_object(to_table(request, resource, [load(entry)], str(entry.rev)))
    if metadata_requested(request):
        return json_object(partial_object(load(entry)))
    return json_bytes(entry.data)


def _encode_continue(rev: int, namespace: str, name: str) -> str:
    token = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rev, "start": f"{namespace}/{name}"})
    return base64.urlsafe_b64encode(token).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        namespace, _, name = str(data["start"]).partition("/")
        return int(data["rv"]), (namespace, name)
    except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ) from None


def list_(request: web.Request, ctx: ApiContext, strategy: Strategy, namespace: str) -> web.Response:
    resource = strategy.info
    filter_ = list_filter(request, strategy, namespace)
    limit = max(query_int(request, "limit") or 0, 0)  # kube lists everything for a limit <= 0
    query_resource_version(request)
    token = request.query.get("continue", "")
    after = None
    revision = ctx.store.revision
    if token:
        rv = request.query.get("resourceVersion", "")
        if rv not in ("", "0"):
            raise bad_request("specifying resource version is not allowed when using continue")
        revision, after = _decode_continue(token)
        if revision < ctx.store.cache.history_start:
            raise gone(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter."
            )
    entries: list[Entry] = []
    more = False
    for entry in ctx.store.cache.entries(resource.plural, filter_, after):
        if limit and len(entries) >= limit:
            more = True
            break
        entries.append(entry)
    next_token = _encode_continue(revision, entries[-1].namespace, entries[-1].name) if more else ""
    if table_requested(request):
        table = to_table(request, resource, [load(e) for e in entries], str(revision), next_token)
        return json_object(table)
    meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if next_token:
        meta["continue"] = next_token
    if metadata_requested(request):
        items = [partial_object(load(e)) for e in entries]
        kind = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1"}
        return json_object({**kind, "metadata": meta, "items": items})
    head = (
        b'{"kind":"'
        + resource.list_kind.encode()
        + b'","apiVersion":"'
        + resource.group_version.encode()
        + b'","metadata":'
        + orjson.dumps(meta)
        + b',"items":['
    )
    return json_bytes(head + b",".join(e.data for e in entries) + b"]}")


# -- writes -------------------------------------------------------------------------------------------------


async def create(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any, namespace: str
) -> web.Response:
    return await create_object(request, ctx, strategy, info, user, namespace, await read_json(request))


async def create_object(
    request: web.Request,
    ctx: ApiContext,
    strategy: Strategy,
    info: RequestInfo,
    user: Any,
    namespace: str,
    body: Any,
) -> web.Response:
    resource = strategy.info
    obj, warnings = strategy.decode_body(body, strict_fields(request))
    meta = obj.setdefault("metadata", {})
    if resource.namespaced and meta.get("namespace") not in (None, "", namespace):
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    generated = not meta.get("name") and bool(meta.get("generateName"))
    strategy.new_metadata(obj, namespace)
    name = str(meta.get("name") or "")
    causes = strategy.check_name(name) + strategy.check_metadata(meta)
    namespace_missing = resource.namespaced and ctx.store.latest("namespaces", "", namespace) is None
    if not causes:
        if not namespace_missing:  # mutating admission (ServiceAccount) runs before validation, as kube's
            for mutator in ctx.mutators:
                mutator.mutate(user, info, obj)
        strategy.prepare_create(obj)
        causes = strategy.validate(obj, None)
    strategy.raise_invalid(name, causes)
    if namespace_missing:
        raise not_found("namespaces", namespace)
    warnings += admit(ctx, user, info, None, obj)
    for _ in range(GENERATE_NAME_TRIES):
        if ctx.store.latest(resource.plural, namespace, name) is None:
            break
        if not generated:
            raise already_exists(resource.plural, name, resource.group)
        strategy.new_metadata(obj, namespace)  # draws a new name from generateName
        name = meta["name"]
    else:
        raise already_exists(resource.plural, name, resource.group)
    headers = warning_headers(warnings)
    if dry_run_requested(request, info.verb):
        return json_object(obj, 201, headers)
    entry = await ctx.store.write(resource.plural, namespace, name, obj, "ADDED")
    return json_bytes(entry.data, 201, headers)


async def update(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any, namespace: str
) -> web.Response:
    resource = strategy.info
    body = await read_json(request)
    new, warnings = strategy.decode_body(body, strict_fields(request))
    meta = new.setdefault("metadata", {})
    if meta.get("name") not in (None, "", info.name):
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({info.name})"
        )
    if resource.namespaced and meta.get("namespace") not in (None, "", namespace):
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    old = latest_or_404(ctx, strategy, namespace, info.name)
    return await store_update_reply(request, ctx, strategy, info, user, old, new, warnings)


async def patch(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any, namespace: str
) -> web.Response:
    resource = strategy.info
    body = await read_json(request)
    if request.content_type == APPLY_PATCH:
        if not request.query.get("fieldManager"):
            raise APIError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                "is required for apply patch",
            )
        if not isinstance(body, dict):
            raise bad_request("an apply patch must be one object")
        if ctx.store.latest(resource.plural, namespace, info.name) is None and not info.subresource:
            # Server-side apply creates what does not exist yet.
            body.setdefault("metadata", {}).setdefault("name", info.name)
            return await create_object(request, ctx, strategy, info, user, namespace, body)
    old = latest_or_404(ctx, strategy, namespace, info.name)
    old_obj = load(old)
    patched = apply_patch(request.content_type, old_obj, body, resource.kind)
    new, warnings = strategy.decode_body(patched, strict_fields(request))
    meta = new.setdefault("metadata", {})
    if meta.get("name") != info.name:
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({info.name})"
        )
    return await store_update_reply(request, ctx, strategy, info, user, old, new, warnings)


async def store_update_reply(
    request: web.Request,
    ctx: ApiContext,
    strategy: Strategy,
    info: RequestInfo,
    user: Any,
    old: Entry,
    new: dict[str, Any],
    warnings: Sequence[str],
) -> web.Response:
    """Store an update or patch result and answer with the stored object.

    A resourceVersion in the new object is a precondition: the client's on an update; on a patch, the stored
    one, kept unless the patch set its own."""
    expected = str(new["metadata"].get("resourceVersion") or "") or None
    warnings = list(warnings)
    entry = await store_update(
        ctx,
        strategy,
        info,
        user,
        old,
        new,
        status_only=info.subresource == "status",
        expected_rv=expected,
        dry_run=dry_run_requested(request, info.verb),
        warnings=warnings,
    )
    return json_bytes(entry.data, 200, warning_headers(warnings))
