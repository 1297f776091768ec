"""The `scale` subresource of Deployments and ReplicaSets: an autoscaling/v1 Scale view of the object.

GET answers the Scale (spec.replicas, status.replicas and the selector as text); PUT and PATCH
change the Scale and write its `spec.replicas` into the object, with the Scale's resourceVersion as
the precondition, as kube's ScaleREST does (`kubectl scale` patches it; `--current-replicas` puts it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from apiserver.handlers.common import ApiContext, dry_run_requested, json_object, read_json
from apiserver.handlers.writes import latest_or_404, load, store_update
from apiserver.patch import apply_patch
from apiserver.registry import Strategy
from apiserver.request import RequestInfo
from apiserver.status import bad_request, invalid
from kubenode.labelselector import to_text


def scale_of(obj: Mapping[str, Any], rev: int) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            key: meta[key] for key in ("name", "namespace", "uid", "creationTimestamp") if key in meta
        }
        | {"resourceVersion": str(rev)},
        "spec": {"replicas": int(spec.get("replicas") or 0)},
        "status": {
            "replicas": int((obj.get("status") or {}).get("replicas") or 0),
            "selector": to_text(spec.get("selector")),
        },
    }


async def serve(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any, namespace: str
) -> web.Response:
    old = latest_or_404(ctx, strategy, namespace, info.name)
    current = scale_of(load(old), old.rev)
    if info.verb == "get":
        return json_object(current)
    body = await read_json(request)
    if info.verb == "patch":
        body = apply_patch(request.content_type, current, body, "Scale")
    if not isinstance(body, Mapping) or body.get("kind") not in (None, "", "Scale"):
        raise bad_request("the object provided is unrecognized (must be of type Scale)")
    replicas = (body.get("spec") or {}).get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        message = f"Invalid value: {replicas!r}: must be greater than or equal to 0"
        raise invalid("Scale", info.name, [("spec.replicas", "FieldValueInvalid", message)], "autoscaling")
    expected = str((body.get("metadata") or {}).get("resourceVersion") or "") or None
    new = load(old)
    new["spec"]["replicas"] = replicas
    entry = await store_update(
        ctx, strategy, info, user, old, new, status_only=False, expected_rv=expected,
        dry_run=dry_run_requested(request, info.verb),
    )  # fmt: skip
    return json_object(scale_of(load(entry), entry.rev))
