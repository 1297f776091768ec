"""DELETE and deletecollection: DeleteOptions from the body or the query, preconditions, graceful
deletion, and namespaces (which take their contents with them).

Namespace deletion is simplified: kube marks the namespace Terminating and its namespace
controller deletes the contents before removing it; here the contents and the namespace are
deleted at once, in one request (pods included, without their grace period).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from aiohttp import web

from apiserver.handlers.common import (
    ApiContext,
    dry_run_requested,
    json_bytes,
    json_object,
    list_filter,
    query_int,
    read_json,
)
from apiserver.handlers.writes import admit, check_preconditions, latest_or_404, load, store_delete
from apiserver.registry import Strategy
from apiserver.registry.kinds import UNDELETABLE_NAMESPACES
from apiserver.request import RequestInfo
from apiserver.resources import SERVED
from apiserver.status import APIError, bad_request, forbidden, success_status

PROPAGATION = ("Orphan", "Background", "Foreground")


# The garbage collector's finalizers (controllers/garbagecollector.py removes them once it has acted).
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
GC_FINALIZERS = {"Orphan": ORPHAN_FINALIZER, "Foreground": FOREGROUND_FINALIZER}


class DeleteOptions(NamedTuple):
    grace: int | None  # gracePeriodSeconds
    preconditions: dict[str, Any]
    dry_run: object  # the body's dryRun (None if absent); dry_run_requested() validates and joins the query's
    policy: str | None = None  # propagationPolicy (orphanDependents folded in); None: the resource's default


def gc_finalizers(strategy: Strategy, obj: dict[str, Any], policy: str | None) -> None:
    """kube's deletionFinalizersForGarbageCollection: Orphan and Foreground deletions hold the object with
    a finalizer for the garbage collector; without a policy the resource's default applies unless one of
    those finalizers is already there; an explicit Background drops them."""
    meta = obj.setdefault("metadata", {})
    finalizers = list(meta.get("finalizers") or [])
    if policy is None:
        if ORPHAN_FINALIZER in finalizers or FOREGROUND_FINALIZER in finalizers:
            return
        policy = strategy.default_propagation
    wanted = GC_FINALIZERS.get(policy)
    kept = [f for f in finalizers if f not in GC_FINALIZERS.values()]
    if wanted:
        kept.append(wanted)
    if kept != finalizers:
        meta["finalizers"] = kept


def delete_options(body: Any, request: web.Request | None) -> DeleteOptions:
    """gracePeriodSeconds, preconditions and dryRun from a DeleteOptions body, else from the query."""
    options: dict[str, Any] = {}
    if isinstance(body, dict):
        if body.get("kind") not in (None, "DeleteOptions"):
            raise bad_request(f"expected DeleteOptions, got kind {body.get('kind')!r}")
        options = body
    elif body is not None:
        raise bad_request("the body of a DELETE must be a DeleteOptions object")
    grace = options.get("gracePeriodSeconds")
    if grace is None and request is not None:
        grace = query_int(request, "gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise bad_request(f"gracePeriodSeconds must be an integer, got {grace!r}")
    policy = options.get("propagationPolicy") or (request.query.get("propagationPolicy") if request else None)
    if policy and policy not in PROPAGATION:
        raise APIError(
            422,
            "Invalid",
            f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "{policy}": '
            'supported values: "Foreground", "Background", "Orphan", "nil"',
        )
    orphan = options.get("orphanDependents")
    if orphan is None and request is not None and "orphanDependents" in request.query:
        orphan = request.query["orphanDependents"] in ("true", "1")
    if not policy and orphan is not None:
        policy = "Orphan" if orphan else "Background"
    preconditions = options.get("preconditions") or {}
    if not isinstance(preconditions, dict):
        raise bad_request("preconditions must be an object")
    return DeleteOptions(grace, preconditions, options.get("dryRun"), policy or None)


async def delete(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any, namespace: str
) -> web.Response:
    resource = strategy.info
    body = await read_json(request, allow_empty=True)
    grace, preconditions, body_dry_run, policy = delete_options(body, request)
    # kube reads dryRun from the body when there is one, else from the query; either one makes a dry run here.
    dry_run = dry_run_requested(request, info.verb, body_dry_run)
    old = latest_or_404(ctx, strategy, namespace, info.name)
    old_obj = load(old)
    check_preconditions(
        strategy, old, old_obj, preconditions.get("uid"), preconditions.get("resourceVersion")
    )
    admit(ctx, user, info, old_obj, None)
    if resource.plural == "namespaces":
        if info.name in UNDELETABLE_NAMESPACES:
            raise forbidden(f'namespaces "{info.name}" is forbidden: this namespace may not be deleted')
        if not dry_run:
            await delete_namespace_contents(ctx, info.name)
    entry, gone = await store_delete(
        ctx,
        strategy,
        old,
        grace,
        ctx.clock(),
        dry_run=dry_run,
        finalize=lambda obj: gc_finalizers(strategy, obj, policy),
    )
    if not gone or strategy.returns_deleted_object:
        return json_bytes(entry.data)
    details = {"name": old.name, "kind": resource.plural, "uid": old_obj.get("metadata", {}).get("uid", "")}
    if resource.group:
        details["group"] = resource.group
    return json_object(success_status(200, details))


async def delete_namespace_contents(ctx: ApiContext, namespace: str) -> None:
    for resource in SERVED:
        if not resource.namespaced:
            continue
        names = list(ctx.store.cache.objects.get(resource.plural, {}).get(namespace, {}))
        for name in names:
            entry = ctx.store.latest(resource.plural, namespace, name)
            if entry is not None:
                await ctx.store.write(resource.plural, namespace, name, load(entry), "DELETED")


async def delete_collection(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any, namespace: str
) -> web.Response:
    """Delete every matching object (each as a DELETE would), answering the list of what was deleted."""
    resource = strategy.info
    body = await read_json(request, allow_empty=True)
    grace, _, body_dry_run, policy = delete_options(body, request)
    dry_run = dry_run_requested(request, info.verb, body_dry_run)
    filter_ = list_filter(request, strategy, namespace)
    items = []
    matched = list(ctx.store.cache.entries(resource.plural, filter_))
    for entry in matched:  # every one admitted before any is deleted: a 403 leaves them all
        current = ctx.store.latest(resource.plural, entry.namespace, entry.name)
        if current is not None:
            admit(ctx, user, info, load(current), None)
    for entry in matched:
        current = ctx.store.latest(resource.plural, entry.namespace, entry.name)
        if current is None:
            continue
        admit(ctx, user, info, load(current), None)
        written, _gone = await store_delete(
            ctx, strategy, current, grace, ctx.clock(), dry_run=dry_run,
            finalize=lambda obj: gc_finalizers(strategy, obj, policy),
        )  # fmt: skip
        items.append(load(written))
    return json_object(
        {
            "kind": resource.list_kind,
            "apiVersion": resource.group_version,
            "metadata": {"resourceVersion": str(ctx.store.revision)},
            "items": items,
        }
    )
