"""events.k8s.io/v1 Events: the same objects as core/v1 Events (kube stores both in one place and converts,
pkg/apis/events/v1/conversion.go), served here by converting each request and reply around the core
handlers. The real kube-scheduler and kube-controller-manager write their events through this group when
discovery lists it (client-go's tools/events), else through core/v1.

Field by field: regarding <-> involvedObject, note <-> message, reportingController <-> reportingComponent,
deprecatedSource/FirstTimestamp/LastTimestamp/Count <-> source/firstTimestamp/lastTimestamp/count; the
rest (eventTime, series, action, reason, related, reportingInstance, type, metadata) keep their names.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from apiserver.handlers import deletes, rest, watch
from apiserver.handlers.common import ApiContext, read_json, strict_fields
from apiserver.handlers.writes import latest_or_404, load
from apiserver.patch import apply_patch
from apiserver.registry import Strategy
from apiserver.request import RequestInfo
from apiserver.status import bad_request, method_not_allowed

GROUP_VERSION = "events.k8s.io/v1"
# (events.k8s.io/v1 name, core/v1 name)
RENAMED = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)


def to_core(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    out = {k: v for k, v in obj.items() if k not in {v1 for v1, _ in RENAMED}}
    for v1, core in RENAMED:
        if v1 in obj:
            out[core] = obj[v1]
    if out.get("apiVersion") in (GROUP_VERSION, None, ""):
        out["apiVersion"] = "v1"
    out.setdefault("kind", "Event")
    return out


def to_v1(obj: Any) -> Any:
    if not isinstance(obj, dict) or obj.get("kind") != "Event":
        return obj  # a Status, a Table: as it is
    out = {k: v for k, v in obj.items() if k not in {core for _, core in RENAMED}}
    for v1, core in RENAMED:
        if core in obj:
            out[v1] = obj[core]
    out["apiVersion"] = GROUP_VERSION
    return out


def _reply(response: web.StreamResponse) -> web.StreamResponse:
    """A core handler's JSON reply in events.k8s.io/v1's form."""
    if not isinstance(response, web.Response) or not isinstance(response.body, bytes):
        return response
    if response.content_type != "application/json":
        return response
    obj = orjson.loads(response.body)
    if obj.get("kind") == "EventList":
        obj = {**obj, "apiVersion": GROUP_VERSION, "items": [to_v1(item) for item in obj["items"]]}
    else:
        obj = to_v1(obj)
    dropped = ("content-type", "content-length")
    headers = {k: v for k, v in response.headers.items() if k.lower() not in dropped}
    body = orjson.dumps(obj)
    return web.Response(body=body, status=response.status, headers=headers, content_type="application/json")


async def serve(
    request: web.Request, ctx: ApiContext, strategy: Strategy, info: RequestInfo, user: Any, namespace: str
) -> web.StreamResponse:
    """strategy: the core Events' (the same storage)."""
    verb = info.verb
    if info.subresource:
        raise method_not_allowed("the server does not allow this method on the requested resource")
    if verb == "get":
        return _reply(rest.get(request, ctx, strategy, namespace, info.name))
    if verb == "list":
        return _reply(rest.list_(request, ctx, strategy, namespace))
    if verb == "watch":
        request["convert"] = to_v1
        return await watch.serve(request, ctx, strategy, namespace, info.name)
    if verb == "create":
        body = to_core(await read_json(request))
        return _reply(await rest.create_object(request, ctx, strategy, info, user, namespace, body))
    if verb in ("update", "patch"):
        body = await read_json(request)
        old = latest_or_404(ctx, strategy, namespace, info.name)
        if verb == "update":
            wanted = to_core(body)
        else:
            wanted = to_core(apply_patch(request.content_type, to_v1(load(old)), body, "Event"))
        new, warnings = strategy.decode_body(wanted, strict_fields(request))
        meta = new.setdefault("metadata", {})
        if meta.get("name") not in (None, "", info.name):
            shown = meta.get("name")
            raise bad_request(
                f"the name of the object ({shown}) does not match the name on the URL ({info.name})"
            )
        reply = await rest.store_update_reply(request, ctx, strategy, info, user, old, new, warnings)
        return _reply(reply)
    if verb == "delete":
        return _reply(await deletes.delete(request, ctx, strategy, info, user, namespace))
    if verb == "deletecollection":
        return _reply(await deletes.delete_collection(request, ctx, strategy, info, user, namespace))
    raise method_not_allowed(f"{verb} is not supported")
