"""The write path shared by create, update, patch, delete and the subresources.

Everything between reading the latest state and `store.write` runs without awaiting, so the
optimistic-concurrency check and the revision it writes at cannot interleave with another
write to the same object. The await happens last: it waits for the COMMIT.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from apiserver.handlers.common import ApiContext
from apiserver.registry import Strategy
from apiserver.registry.schema import format_time
from apiserver.request import RequestInfo
from apiserver.status import STALE_OBJECT, conflict, forbidden, not_found
from apiserver.storage.cache import Entry
from apiserver.storage.store import dumps

audit_log = logging.getLogger("apiserver.audit")  # audit annotations; never an object's contents


def load(entry: Entry) -> dict[str, Any]:
    result: dict[str, Any] = orjson.loads(entry.data)
    return result


def admit(
    ctx: ApiContext,
    user: Any,
    info: RequestInfo,
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
) -> list[str]:
    """NodeRestriction, then the validating plugins (apiserver/admission): raises the first refusal, logs
    audit annotations to `apiserver.audit`, returns the warnings for the answer's `Warning` headers."""
    if ctx.admit is not None and user is not None:
        message = ctx.admit(user, info, old, new)
        if message:
            raise forbidden(message)
    warnings: list[str] = []
    for validator in ctx.validators:
        verdict = validator.validate(user, info, old, new)
        if verdict is None:
            continue
        if verdict.audit:
            name = info.name or str(((new or old or {}).get("metadata") or {}).get("name") or "")
            where = f"{info.namespace}/{name}" if info.namespace else name
            annotations = " ".join(f"{key}={value!r}" for key, value in sorted(verdict.audit.items()))
            audit_log.info(
                "ADMISSION %s %s %s user=%r: %s",
                info.verb,
                info.resource,
                where,
                getattr(user, "name", ""),
                annotations,
            )
        if verdict.denied is not None:
            raise verdict.denied
        warnings += verdict.warnings
    return warnings


def latest_or_404(ctx: ApiContext, strategy: Strategy, namespace: str, name: str) -> Entry:
    info = strategy.info
    entry = ctx.store.latest(info.plural, namespace if info.namespaced else "", name)
    if entry is None:
        raise not_found(info.plural, name, info.group)
    return entry


def check_preconditions(
    strategy: Strategy, old: Entry, old_obj: Mapping[str, Any], uid: Any, rv: Any
) -> None:
    """uid / resourceVersion preconditions (DeleteOptions, a Binding, the object sent): 409 on mismatch."""
    info = strategy.info
    old_uid = old_obj.get("metadata", {}).get("uid", "")
    if uid and uid != old_uid:
        raise conflict(
            info.plural,
            old.name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}",
            info.group,
        )
    if rv and str(rv) != str(old.rev):
        raise conflict(
            info.plural,
            old.name,
            f"Precondition failed: ResourceVersion in precondition: {rv}, "
            f"ResourceVersion in object meta: {old.rev}",
            info.group,
        )


def without_rv(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


async def store_update(
    ctx: ApiContext,
    strategy: Strategy,
    info: RequestInfo,
    user: Any,
    old: Entry,
    new: dict[str, Any],
    *,
    status_only: bool,
    expected_rv: str | None,
    dry_run: bool = False,
    warnings: list[str] | None = None,
) -> Entry:
    """Update `old` to `new` (already decoded): concurrency check, strategy rules, validation, admission.

    Synchronous up to the final await."""
    resource = strategy.info
    if expected_rv and expected_rv != str(old.rev):
        raise conflict(resource.plural, old.name, STALE_OBJECT, resource.group)
    old_obj = load(old)
    check_preconditions(strategy, old, old_obj, new.get("metadata", {}).get("uid"), None)
    if status_only:
        strategy.prepare_status_update(new, old_obj)
    else:
        strategy.prepare_update(new, old_obj)
    strategy.keep_metadata(new, old_obj)
    causes = strategy.check_metadata(new.get("metadata", {})) + strategy.validate(new, old_obj)
    strategy.raise_invalid(old.name, causes)
    admitted = admit(ctx, user, info, old_obj, new)
    if warnings is not None:
        warnings += admitted  # the admission plugins' warnings, for the reply's Warning headers
    if without_rv(new) == without_rv(old_obj):
        return old  # kube skips a write that changes nothing: no new resourceVersion, no event
    if dry_run:  # every check ran; nothing is written
        return Entry(old.resource, old.namespace, old.name, old.rev, dumps(new), {}, {})
    meta = new["metadata"]
    if (
        meta.get("deletionTimestamp")
        and not meta.get("finalizers")
        and not meta.get("deletionGracePeriodSeconds")
    ):
        # The last finalizer of an object being deleted went away: now it goes.
        return await ctx.store.write(resource.plural, old.namespace, old.name, new, "DELETED")
    return await ctx.store.write(resource.plural, old.namespace, old.name, new, "MODIFIED")


async def store_delete(
    ctx: ApiContext,
    strategy: Strategy,
    old: Entry,
    requested_grace: int | None,
    now: datetime.datetime,
    *,
    dry_run: bool = False,
    finalize: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Entry, bool]:
    """Delete `old` as kube's generic registry does: graceful (pods bound to a node), held by finalizers,
    or at once. Returns the entry written (under dry_run: what would be, nothing written) and whether the
    object is (or would be) gone. `finalize` adds the garbage collector's finalizers the request asks for."""
    resource = strategy.info
    obj = load(old)
    if finalize is not None:
        finalize(obj)
    meta = obj.setdefault("metadata", {})
    grace = strategy.delete_grace(obj, requested_grace)
    deleting = bool(meta.get("deletionTimestamp"))
    current = meta.get("deletionGracePeriodSeconds")
    if grace > 0 or meta.get("finalizers"):
        if deleting and current is not None and int(current) <= grace:
            return old, False  # already deleting with a grace at least as short: nothing changes
        meta["deletionTimestamp"] = format_time(now + datetime.timedelta(seconds=grace))
        meta["deletionGracePeriodSeconds"] = grace
        if "generation" in meta:
            meta["generation"] = int(meta["generation"]) + 1
        if dry_run:
            return Entry(old.resource, old.namespace, old.name, old.rev, dumps(obj), {}, {}), False
        entry = await ctx.store.write(resource.plural, old.namespace, old.name, obj, "MODIFIED")
        return entry, False
    if dry_run:
        return old, True
    entry = await ctx.store.write(resource.plural, old.namespace, old.name, obj, "DELETED")
    return entry, True
