"""pods/binding, the legacy namespaces/{ns}/bindings, and pods/eviction.

Binding answers 201 `Status{Success}` (not the pod), as kube's BindingREST does; eviction is a
delete of the pod with the Eviction's DeleteOptions, answered 201 `Status{Success}` too (no
PodDisruptionBudgets are served, so nothing blocks it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from apiserver.handlers.common import ApiContext, dry_run_requested, json_object, read_json
from apiserver.handlers.deletes import delete_options
from apiserver.handlers.writes import admit, check_preconditions, latest_or_404, load, store_delete
from apiserver.registry import Strategy
from apiserver.registry.pods import bind
from apiserver.request import RequestInfo
from apiserver.status import APIError, bad_request, success_status


def _check_kind(body: Any, kind: str, api_versions: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise bad_request(f"the object provided is unrecognized (must be of type {kind})")
    if body.get("kind") not in (None, "", kind) or body.get("apiVersion") not in (None, "", *api_versions):
        raise bad_request(
            f"the object provided is unrecognized (must be of type {kind}): "
            f"kind {body.get('kind')!r} in version {body.get('apiVersion')!r}"
        )
    return body


def _copy_for_bind(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the pod that `bind` may change, old_pod left as it was for admission: bind sets
    metadata.annotations, spec.nodeName and a status condition, so those containers are copied
    (cheaper than decoding the stored JSON a second time)."""
    copy = dict(pod)
    meta = copy["metadata"] = dict(pod.get("metadata") or {})
    if isinstance(meta.get("annotations"), dict):
        meta["annotations"] = dict(meta["annotations"])
    copy["spec"] = dict(pod.get("spec") or {})
    status = copy["status"] = dict(pod.get("status") or {})
    if isinstance(status.get("conditions"), list):
        status["conditions"] = list(status["conditions"])
    return copy


async def _bind(
    ctx: ApiContext,
    strategy: Strategy,
    info: RequestInfo,
    user: Any,
    namespace: str,
    body: Mapping[str, Any],
    dry_run: bool,
) -> web.Response:
    meta = body.get("metadata") or {}
    target = body.get("target") or {}
    if not isinstance(target, Mapping) or not target.get("name"):
        raise APIError(500, "InternalError", "Internal error occurred: target.name: Required value")
    if target.get("kind") not in (None, "", "Node"):
        raise APIError(
            500,
            "InternalError",
            f"Internal error occurred: target.kind: Invalid value: {target.get('kind')!r}",
        )
    pod_name = str(meta.get("name") or "")
    old = latest_or_404(ctx, strategy, namespace, pod_name)
    old_pod = load(old)
    check_preconditions(strategy, old, old_pod, meta.get("uid"), meta.get("resourceVersion"))
    pod = _copy_for_bind(old_pod)
    annotations = meta.get("annotations") or {}
    bind(pod, str(target["name"]), {str(k): str(v) for k, v in annotations.items()}, ctx.clock())
    admit(ctx, user, info, old_pod, pod)
    if not dry_run:
        await ctx.store.write("pods", namespace, pod_name, pod, "MODIFIED")
    return json_object(success_status(201), 201)


async def binding(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any
) -> web.Response:
    body = _check_kind(await read_json(request), "Binding", ("v1",))
    meta = body.get("metadata") or {}
    if meta.get("name") not in (None, "", info.name):
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({info.name})"
        )
    named = {**body, "metadata": {**meta, "name": info.name}}
    dry_run = dry_run_requested(request, info.verb)
    return await _bind(ctx, strategy, info, user, info.namespace, named, dry_run)


async def legacy_binding(request: web.Request, ctx: ApiContext, info: RequestInfo, user: Any) -> web.Response:
    """POST /api/v1/namespaces/{ns}/bindings: the Binding names the pod (py create_namespaced_binding)."""
    body = _check_kind(await read_json(request), "Binding", ("v1",))
    strategy = ctx.strategies["pods"]
    pod_info = RequestInfo(
        True,
        info.path,
        "create",
        "",
        "v1",
        info.namespace,
        "pods",
        "binding",
        str((body.get("metadata") or {}).get("name") or ""),
    )
    dry_run = dry_run_requested(request, info.verb)
    return await _bind(ctx, strategy, pod_info, user, info.namespace, body, dry_run)


async def eviction(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any
) -> web.Response:
    body = _check_kind(await read_json(request), "Eviction", ("policy/v1", "policy/v1beta1"))
    grace, preconditions, body_dry_run, _policy = delete_options(body.get("deleteOptions"), None)
    # kube copies the request's dryRun into the Eviction's DeleteOptions (propagateDryRun): either one counts.
    dry_run = dry_run_requested(request, info.verb, body_dry_run)
    old = latest_or_404(ctx, strategy, info.namespace, info.name)
    pod = load(old)
    check_preconditions(strategy, old, pod, preconditions.get("uid"), preconditions.get("resourceVersion"))
    admit(ctx, user, info, pod, None)
    await store_delete(ctx, strategy, old, grace, ctx.clock(), dry_run=dry_run)
    return json_object(success_status(201), 201)
