"""`/openapi/v2` and `/openapi/v3` for the served resources, built once, on first request.

kubectl's strict validation (the default for `create`/`apply`) reads `/openapi/v3`, finds the group-version's
document and looks for a PATCH operation of the kind with a `fieldValidation` query parameter; finding it, it
leaves validation to the server (`?fieldValidation=Strict`). Client-side `apply` builds its strategic merge
patch from the same document's schemas (merge keys from `x-kubernetes-patch-merge-key`). The schemas come
from the `kubernetes` client's models (openapi_schemas.py); the paths from the resource registry.
Flow: `operations()` lists (path, method, Operation) per resource; `v3_document`/`v2_document` render them.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from apiserver import openapi_v2pb
from apiserver.openapi_schemas import SchemaSet, add_patch_schema, kind_class, schema_set
from apiserver.resources import ResourceInfo
from apiserver.status import api_error

# Server-side apply (application/apply-patch+yaml) is served only in a simplified form (no field ownership;
# docs/apiserver.md), so the documents do not advertise it.
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
BODY_TYPES = ("application/json", "application/yaml")
WRITE_QUERY = ("dryRun", "fieldManager", "fieldValidation")
LIST_QUERY = (
    "allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
    "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch",
)  # fmt: skip
INTEGER_QUERY = {"limit", "timeoutSeconds", "gracePeriodSeconds"}
BOOLEAN_QUERY = {"allowWatchBookmarks", "sendInitialEvents", "watch", "force"}


@dataclass
class Operation:
    action: str  # x-kubernetes-action: get|list|create|put|patch|delete|deletecollection|post
    operation_id: str
    group: str
    version: str
    kind: str  # x-kubernetes-group-version-kind of the operation
    path_params: tuple[str, ...]
    query: tuple[str, ...] = ()
    body: str = ""  # client model class of the body, "Patch" for PATCH, "" for none
    response: str = ""  # client model class of the 200/201 answer
    tags: list[str] = field(default_factory=list)


def _camel(text: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in text.replace(".k8s.io", "").replace(".", "-").split("-"))


def operations(resources: Sequence[ResourceInfo]) -> list[tuple[str, str, Operation]]:
    """(path, method, Operation) for each verb and subresource, laid out as kube-apiserver's paths."""
    return [entry for r in resources if r.has_client_model for entry in _resource_operations(r)]


def _resource_operations(r: ResourceInfo) -> list[tuple[str, str, Operation]]:
    gv_id = _camel(r.group or "core") + _camel(r.version)
    prefix = f"/apis/{r.group}/{r.version}" if r.group else f"/api/{r.version}"
    scope = "Namespaced" if r.namespaced else ""
    base = f"{prefix}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{prefix}/{r.plural}"
    cls, list_cls = kind_class(r.group, r.kind), kind_class(r.group, r.list_kind)
    tags = [gv_id[:1].lower() + gv_id[1:]]
    collection = ("namespace",) if r.namespaced else ()
    item = (*collection, "name")
    patch_query = (*WRITE_QUERY, "force")

    def op(
        action: str, name: str, params: tuple[str, ...], query: tuple[str, ...] = (), **kw: Any
    ) -> Operation:
        return Operation(action, f"{name}{gv_id}{scope}{r.kind}", r.group, r.version, r.kind, params, query,
                         tags=tags, **kw)  # fmt: skip

    ops: list[tuple[str, str, Operation]] = []
    path = f"{base}/{{name}}"
    if "list" in r.verbs:
        ops.append((base, "get", op("list", "list", collection, LIST_QUERY, response=list_cls)))
        if r.namespaced:
            every = Operation("list", f"list{gv_id}{r.kind}ForAllNamespaces", r.group, r.version, r.kind, (),
                              LIST_QUERY, response=list_cls, tags=tags)  # fmt: skip
            ops.append((f"{prefix}/{r.plural}", "get", every))
    if "create" in r.verbs:
        ops.append((base, "post", op("post", "create", collection, WRITE_QUERY, body=cls, response=cls)))
    if "deletecollection" in r.verbs:
        ops.append((base, "delete", op("deletecollection", "deleteCollection", collection, LIST_QUERY,
                                       body="V1DeleteOptions", response="V1Status")))  # fmt: skip
    if "get" in r.verbs:
        ops.append((path, "get", op("get", "read", item, response=cls)))
    if "update" in r.verbs:
        ops.append((path, "put", op("put", "replace", item, WRITE_QUERY, body=cls, response=cls)))
    if "patch" in r.verbs:
        ops.append((path, "patch", op("patch", "patch", item, patch_query, body="Patch", response=cls)))
    if "delete" in r.verbs:
        ops.append((path, "delete", op("delete", "delete", item, ("dryRun", "gracePeriodSeconds"),
                                       body="V1DeleteOptions", response=cls)))  # fmt: skip
    for sub in r.subresources:
        sub_path, suffix = f"{path}/{sub.name}", _camel(sub.name)
        if "get" in sub.verbs and not sub.connect:  # status (the object itself) and scale (a Scale)
            sub_cls = cls if sub.kind == r.kind else kind_class(sub.group, sub.kind)
            for verb, method, name, query, body in (
                ("get", "get", "read", (), ""),
                ("update", "put", "replace", WRITE_QUERY, sub_cls),
                ("patch", "patch", "patch", patch_query, "Patch"),
            ):
                if verb in sub.verbs:
                    sub_op = op(
                        verb if verb != "update" else "put", name, item, query, body=body, response=sub_cls
                    )
                    sub_op.operation_id += suffix
                    ops.append((sub_path, method, sub_op))
        elif "create" in sub.verbs and not sub.connect:  # connect streams carry no typed body
            body_cls = kind_class(sub.group, sub.kind)
            created = Operation("post", f"create{gv_id}{scope}{r.kind}{suffix}", sub.group or r.group,
                                sub.version or r.version, sub.kind, item, WRITE_QUERY, body=body_cls,
                                response=body_cls, tags=tags)  # fmt: skip
            ops.append((sub_path, "post", created))
    return ops


def _query_schema(name: str) -> dict[str, Any]:
    if name in INTEGER_QUERY:
        return {"type": "integer"}
    if name in BOOLEAN_QUERY:
        return {"type": "boolean"}
    return {"type": "string"}


def _common(op: Operation) -> dict[str, Any]:
    return {
        "tags": op.tags,
        "operationId": op.operation_id,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": {"group": op.group, "version": op.version, "kind": op.kind},
    }


def v3_document(group: str, version: str, resources: Sequence[ResourceInfo]) -> dict[str, Any]:
    """The per-group-version document kubectl fetches from `/openapi/v3/api/v1?hash=...`."""
    schemas: SchemaSet = schema_set("#/components/schemas/", [])
    patch_ref = add_patch_schema(schemas)
    paths: dict[str, dict[str, Any]] = {}
    for path, method, op in operations([r for r in resources if (r.group, r.version) == (group, version)]):
        out = _common(op)
        out["parameters"] = [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string", "uniqueItems": True}}
            for p in op.path_params
        ] + [{"name": q, "in": "query", "schema": _query_schema(q), "uniqueItems": True} for q in op.query]
        if op.body:
            body_schema = {"$ref": patch_ref} if op.body == "Patch" else schemas.ref(op.body)
            types = PATCH_TYPES if op.body == "Patch" else BODY_TYPES
            out["requestBody"] = {
                "content": {t: {"schema": body_schema} for t in types},
                "required": op.body != "V1DeleteOptions",
            }
        produces = {t: {"schema": schemas.ref(op.response)} for t in BODY_TYPES}
        if op.action == "list":
            produces["application/json;stream=watch"] = {"schema": schemas.ref("V1WatchEvent")}
        code = "201" if method == "post" else "200"
        out["responses"] = {
            code: {"description": "OK" if code == "200" else "Created", "content": produces},
            "401": {"description": "Unauthorized"},
        }
        paths.setdefault(path, {})[method] = out
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0+kubenode"},
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.schemas.items())),
            "securitySchemes": {"BearerToken": {"type": "apiKey", "in": "header", "name": "authorization"}},
        },
        "security": [{"BearerToken": []}],
    }


def v2_document(resources: Sequence[ResourceInfo]) -> dict[str, Any]:
    """The single Swagger 2.0 document of `/openapi/v2` (JSON; kubectl prefers v3 and never needs it here)."""
    schemas: SchemaSet = schema_set("#/definitions/", [])
    patch_ref = add_patch_schema(schemas)
    paths: dict[str, dict[str, Any]] = {}
    for path, method, op in operations(resources):
        out = _common(op)
        params: list[dict[str, Any]] = [
            {"name": p, "in": "path", "required": True, "type": "string", "uniqueItems": True}
            for p in op.path_params
        ]
        params += [{"name": q, "in": "query", **_query_schema(q), "uniqueItems": True} for q in op.query]
        if op.body:
            schema = {"$ref": patch_ref} if op.body == "Patch" else schemas.ref(op.body)
            params.append(
                {"name": "body", "in": "body", "required": op.body != "V1DeleteOptions", "schema": schema}
            )
            out["consumes"] = list(PATCH_TYPES if op.body == "Patch" else ("*/*",))
        out["parameters"] = params
        out["produces"] = ["application/json", "application/yaml"]
        code = "201" if method == "post" else "200"
        out["responses"] = {
            code: {"description": "OK", "schema": schemas.ref(op.response)},
            "401": {"description": "Unauthorized"},
        }
        out["schemes"] = ["https"]
        paths.setdefault(path, {})[method] = out
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0+kubenode"},
        "paths": paths,
        "definitions": dict(sorted(schemas.schemas.items())),
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "in": "header", "name": "authorization"}},
        "security": [{"BearerToken": []}],
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


class Documents:
    """The serialized documents, built on first use (in a worker thread, once): building them walks ~150
    client models, which would otherwise add to every start-up, and most clients never ask."""

    def __init__(self, resources: Sequence[ResourceInfo]) -> None:
        self.resources = tuple(resources)
        self._lock = threading.Lock()
        self._v3: dict[str, tuple[bytes, str]] | None = None
        self._v2: tuple[bytes, str] | None = None
        self._v2pb: bytes | None = None

    def v3(self) -> dict[str, tuple[bytes, str]]:
        with self._lock:
            if self._v3 is None:
                docs = {}
                documented = (r for r in self.resources if r.has_client_model)
                for group, version in dict.fromkeys((r.group, r.version) for r in documented):
                    body = orjson.dumps(v3_document(group, version, self.resources))
                    docs[_gv_path(group, version)] = (body, hashlib.sha512(body).hexdigest().upper())
                self._v3 = docs
            return self._v3

    def v2(self) -> tuple[bytes, str]:
        with self._lock:
            if self._v2 is None:
                document = v2_document(self.resources)
                body = orjson.dumps(document)
                self._v2 = (body, hashlib.sha512(body).hexdigest().upper())
                self._v2pb = openapi_v2pb.encode_document(document)
            return self._v2

    def v2_protobuf(self) -> bytes:
        self.v2()
        assert self._v2pb is not None
        return self._v2pb


def add_routes(app: web.Application, resources: Sequence[ResourceInfo]) -> None:
    """The root lists each group-version with its content hash; documents are served from bytes."""
    documents = Documents(resources)

    async def v3_root(request: web.Request) -> web.Response:
        docs = await asyncio.to_thread(documents.v3)
        root = {
            "paths": {p: {"serverRelativeURL": f"/openapi/v3/{p}?hash={h}"} for p, (_, h) in docs.items()}
        }
        return web.Response(body=orjson.dumps(root), content_type="application/json")

    async def v3_group_version(request: web.Request) -> web.Response:
        doc = (await asyncio.to_thread(documents.v3)).get(request.match_info["path"].strip("/"))
        if doc is None:
            return _status_404(request.path)
        body, digest = doc
        headers = {"Etag": f'"{digest}"'}
        if request.query.get("hash") == digest:  # immutable at this URL; let clients cache it for good
            headers["Cache-Control"] = "public, immutable"
        return web.Response(body=body, content_type="application/json", headers=headers)

    async def v2_handler(request: web.Request) -> web.Response:
        accept = request.headers.get("Accept", "")
        if "protobuf" in accept:  # client-go's discovery.OpenAPISchema() asks for nothing else
            body = await asyncio.to_thread(documents.v2_protobuf)
            return web.Response(body=body, headers={"Content-Type": openapi_v2pb.MEDIA_TYPE})
        if accept and "json" not in accept and "*/*" not in accept:
            return _status(406, "NotAcceptable", "only JSON and protobuf are served for /openapi/v2")
        body, digest = await asyncio.to_thread(documents.v2)
        return web.Response(body=body, content_type="application/json", headers={"Etag": f'"{digest}"'})

    app.router.add_get("/openapi/v3", v3_root)
    app.router.add_get("/openapi/v3/", v3_root)
    app.router.add_get("/openapi/v3/{path:.+}", v3_group_version)
    app.router.add_get("/openapi/v2", v2_handler)
    app.router.add_get("/swagger.json", v2_handler)


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.Response(
        status=code, body=orjson.dumps(api_error(code, reason, message)), content_type="application/json"
    )


def _status_404(path: str) -> web.Response:
    return _status(404, "NotFound", f'the server could not find the requested resource ("{path}")')
