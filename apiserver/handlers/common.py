"""Shared pieces of the REST handlers: the server context, bodies, responses and Table negotiation."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import orjson
from aiohttp import web

from apiserver import protobody
from apiserver.registry import Clock, Strategy
from apiserver.request import RequestInfo
from apiserver.resources import ResourceInfo
from apiserver.selectors import parse_field_selector, parse_label_selector
from apiserver.status import APIError, bad_request, invalid, too_large, unsupported_media_type
from apiserver.storage.cache import Filter
from apiserver.storage.store import Store

log = logging.getLogger(__name__)


def optional_module(name: str) -> ModuleType | None:
    """SURFACE's modules (discovery, openapi, printers, metrics): serve without one that fails to import."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a broken optional part must not stop the server
        log.warning("%s unavailable: %s", name, exc)
        return None


METRICS = optional_module("apiserver.metrics")

MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's limit for a request body (3 MiB)
JSON = "application/json"

Admit = Callable[[Any, RequestInfo, Mapping[str, Any] | None, Mapping[str, Any] | None], str | None]


@dataclass
class ApiContext:
    store: Store
    strategies: dict[str, Strategy]
    clock: Clock
    admit: Admit | None = None  # NodeRestriction admission (SURFACE's noderestriction.admit)
    validators: list[Any] = field(default_factory=list)  # apiserver.admission Validators (PodSecurity)
    mutators: list[Any] = field(default_factory=list)  # mutating admission on create (ServiceAccount)
    bookmark_interval: float = 60.0  # seconds between BOOKMARKs on an idle watch
    min_request_timeout: float = 1800.0  # watches without timeoutSeconds end after 1-2x this
    extras: dict[str, Any] = field(default_factory=dict)


CONTEXT: web.AppKey[ApiContext] = web.AppKey("apiserver_context", ApiContext)


def json_bytes(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON, headers=headers)


def json_object(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return json_bytes(orjson.dumps(obj), status, headers)


def error_response(error: APIError) -> web.Response:
    return json_object(error.status, error.code)


async def read_json(request: web.Request, *, allow_empty: bool = False) -> Any:
    """The decoded JSON body (400 when unreadable, 413 over 3 MiB, 415 for another content type)."""
    length = request.content_length
    if length is not None and length > MAX_BODY:
        raise too_large()
    chunks: list[bytes] = []
    total = 0
    content = request.content
    while not content.at_eof():  # a body that has all arrived is taken without waiting
        chunk = content.read_nowait(1 << 20) or await content.read(1 << 20)
        if not chunk:
            break
        total += len(chunk)
        if total > MAX_BODY:
            raise too_large()
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data.strip():
        if allow_empty:
            return None
        raise bad_request("the request body is empty")
    content_type = request.content_type
    if content_type == protobody.MEDIA_TYPE:  # kubectl's typed clients (create namespace, drain, ...)
        try:
            decoded = protobody.decode(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise bad_request(f"unable to decode the protobuf body: {exc}") from None
        if decoded is None:
            raise APIError(
                415,
                "UnsupportedMediaType",
                f"{protobody.MEDIA_TYPE} bodies are read only for the kinds of k8s.io/api's core, apps, "
                f"batch, coordination, events, resource, policy, storage, rbac, node, autoscaling, discovery "
                f"and the auth groups, and {', '.join(protobody.DECODERS)}: send application/json",
            )
        return decoded
    if content_type == "application/apply-patch+yaml":
        return _yaml(data)
    if request.method != "PATCH" and content_type not in (JSON, "", "application/octet-stream", "*/*"):
        if content_type.endswith("yaml"):
            return _yaml(data)
        raise unsupported_media_type(content_type)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from None


def _yaml(data: bytes) -> Any:
    import yaml

    from kubenode import yamlload

    try:  # anchors and aliases within go-yaml's budget, as kube-apiserver reads them
        return yamlload.load(data)
    except yaml.YAMLError as exc:
        raise bad_request(f"error converting YAML to JSON: {exc}") from None
    except RecursionError:  # kube's go-yaml refuses past 10000 levels; the parser here stops sooner
        raise bad_request("error converting YAML to JSON: yaml: exceeded max depth") from None


def table_requested(request: web.Request) -> bool:
    """kubectl get asks `application/json;as=Table;v=v1;g=meta.k8s.io, ...`: the first acceptable wins."""
    for media in request.headers.get("Accept", "").split(","):
        params = {
            p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip() for p in media.split(";")[1:] if "=" in p
        }
        kind = media.split(";", 1)[0].strip()
        if (
            params.get("as") == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in ("v1", "v1beta1")
        ):
            return True
        if kind in (JSON, "*/*", "application/*") and "as" not in params:
            return False
    return False


def metadata_requested(request: web.Request) -> bool:
    """The metadata client (kube-controller-manager's garbage collector and quota informers) asks
    `application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,
    application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json` (PartialObjectMetadataList
    for lists): the first acceptable wins, and kube answers objects of metadata only."""
    for media in request.headers.get("Accept", "").split(","):
        params = {
            p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip() for p in media.split(";")[1:] if "=" in p
        }
        kind = media.split(";", 1)[0].strip()
        if kind not in (JSON, "*/*", "application/*"):
            continue  # protobuf is not written here: the next type offered is taken
        if (
            params.get("as") in ("PartialObjectMetadata", "PartialObjectMetadataList")
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in ("v1", "v1beta1")
        ):
            return True
        if "as" not in params:
            return False
    return False


def partial_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata", {})
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}


def to_table(
    request: web.Request,
    resource: ResourceInfo,
    objects: Sequence[Mapping[str, Any]],
    resource_version: str,
    continue_token: str = "",
) -> dict[str, Any]:
    from apiserver.printers import to_table as printer

    include = request.query.get("includeObject", "Metadata") or "Metadata"
    return printer(
        resource,
        objects,
        include_object=include,
        resource_version=resource_version,
        continue_token=continue_token,
    )


# The options kind whose dryRun field a verb reads (kube validates it as that kind, 422 when unknown).
OPTIONS_KIND = {
    "create": "CreateOptions",
    "update": "UpdateOptions",
    "patch": "PatchOptions",
    "delete": "DeleteOptions",
    "deletecollection": "DeleteOptions",
}


def _go_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dry_run_requested(request: web.Request, verb: str, body_values: object = None) -> bool:
    """Whether a write is a dry run: `?dryRun=All` (or a DeleteOptions/Eviction body's `dryRun`).

    Any other value is refused as kube's ValidateDryRun does, before anything is read or written:
    422 `CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"x"}: ...`."""
    values = request.query.getall("dryRun", [])
    if body_values is not None:
        if not isinstance(body_values, list) or not all(isinstance(v, str) for v in body_values):
            raise bad_request(f"dryRun must be a list of strings, got {body_values!r}")
        values = [*values, *body_values]
    unsupported = [v for v in values if v != "All"]
    if unsupported:
        shown = "[]string{" + ", ".join(_go_quote(v) for v in values) + "}"
        message = f'Unsupported value: {shown}: supported values: "All"'
        kind = OPTIONS_KIND.get(verb, "CreateOptions")
        raise invalid(kind, "", [("dryRun", "FieldValueNotSupported", message)], "meta.k8s.io")
    return bool(values)


def query_resource_version(request: web.Request) -> int:
    """`resourceVersion` of a get, list or watch as a revision (0 when unset or "0").

    kube parses it with strconv.ParseUint and answers 400 `invalid resource version: ...` otherwise."""
    raw = request.query.get("resourceVersion", "")
    if raw in ("", "0"):
        return 0
    problem = "invalid syntax" if not (raw.isascii() and raw.isdigit()) else ""
    if not problem and int(raw) >= 2**64:
        problem = "value out of range"
    if problem:
        raise bad_request(
            f"invalid resource version: resourceVersion: Invalid value: {_go_quote(raw)}: "
            f"strconv.ParseUint: parsing {_go_quote(raw)}: {problem}"
        )
    return int(raw)


def query_int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(f"invalid value for {name}: {raw!r}: must be an integer") from None


def query_bool(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("1", "true")


def strict_fields(request: web.Request) -> bool:
    """fieldValidation=Strict (kubectl's default) makes unknown fields a 400; Warn and Ignore drop them;
    anything else is kube's 422 (ValidateFieldValidation)."""
    value = request.query.get("fieldValidation", "")
    if value not in ("", "Strict", "Warn", "Ignore"):
        kind = {"POST": "CreateOptions", "PUT": "UpdateOptions"}.get(request.method, "PatchOptions")
        message = f'Unsupported value: {_go_quote(value)}: supported values: "", "Ignore", "Strict", "Warn"'
        raise invalid(kind, "", [("fieldValidation", "FieldValueNotSupported", message)], "meta.k8s.io")
    return value == "Strict"


def warning_headers(warnings: Sequence[str]) -> dict[str, str]:
    if not warnings:
        return {}
    return {"Warning": ", ".join('299 - "' + w.replace('"', '\\"') + '"' for w in warnings)}


def list_filter(request: web.Request, strategy: Strategy, namespace: str) -> Filter:
    """The namespace, labelSelector and fieldSelector of a list, watch or deletecollection."""
    return Filter(
        namespace,
        parse_label_selector(request.query.get("labelSelector")),
        parse_field_selector(request.query.get("fieldSelector"), strategy.fields),
    )
