"""Legacy JSON discovery and `/version`, built from the served-resource registry.

kubectl asks for aggregated discovery first but reads a plain `application/json` answer as the legacy
documents (`APIVersions`, `APIGroupList`, `APIResourceList`), which is all this serves. `/apis` must never
fail (kubectl treats any error there as fatal), so it is computed once at start-up and answered from memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from aiohttp import web

from apiserver.resources import ResourceInfo
from apiserver.status import api_error

# The Kubernetes release whose API this server follows; kubectl warns when it is more than one minor away.
KUBE_MAJOR = "1"
KUBE_MINOR = "37"
GIT_VERSION = f"v{KUBE_MAJOR}.{KUBE_MINOR}.0+kubenode"


def version_info() -> dict[str, str]:
    import platform
    import sys

    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "emulationMajor": KUBE_MAJOR,
        "emulationMinor": KUBE_MINOR,
        "minCompatibilityMajor": KUBE_MAJOR,
        "minCompatibilityMinor": str(int(KUBE_MINOR) - 1),
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": "cpython",
        "platform": f"linux/{arch}",
    }


def api_resources(group: str, version: str, resources: Sequence[ResourceInfo]) -> dict[str, Any]:
    """APIResourceList of one group/version: each resource, then its subresources as `pods/status`."""
    listed: list[dict[str, Any]] = []
    for r in resources:
        if (r.group, r.version) != (group, version) or not r.verbs:
            continue
        entry: dict[str, Any] = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": sorted(r.verbs),
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        listed.append(entry)
        for sub in r.subresources:
            sub_entry: dict[str, Any] = {
                "name": f"{r.plural}/{sub.name}",
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": sub.kind,
                "verbs": sorted(sub.verbs),
            }
            if sub.group:  # only where it differs from the parent, as kube's eviction has policy/v1
                sub_entry["group"] = sub.group
                sub_entry["version"] = sub.version or "v1"
            listed.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": listed,
    }


def api_groups(resources: Sequence[ResourceInfo]) -> dict[str, Any]:
    """APIGroupList: every named group (core is not in it), each with its versions, first preferred."""
    versions: dict[str, list[str]] = {}
    for r in resources:
        if r.group and r.version not in versions.setdefault(r.group, []):
            versions[r.group].append(r.version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, vs) for name, vs in versions.items()],
    }


def _group(name: str, versions: Sequence[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def _json(body: Any) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _not_found(path: str) -> web.Response:
    body = api_error(404, "NotFound", f'the server could not find the requested resource ("{path}")', {})
    return web.Response(status=404, body=orjson.dumps(body), content_type="application/json")


def add_routes(app: web.Application, resources: Sequence[ResourceInfo]) -> None:
    groups_doc = orjson.dumps(api_groups(resources))
    lists = {
        (r.group, r.version): orjson.dumps(api_resources(r.group, r.version, resources)) for r in resources
    }
    group_docs = {
        g["name"]: orjson.dumps({**g, "kind": "APIGroup", "apiVersion": "v1"})
        for g in api_groups(resources)["groups"]
    }
    core_versions = sorted({r.version for r in resources if not r.group})
    version_doc = orjson.dumps(version_info())

    async def api(request: web.Request) -> web.Response:
        return _json(
            {
                "kind": "APIVersions",
                "versions": core_versions,
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}],
            }
        )

    async def api_version(request: web.Request) -> web.Response:
        doc = lists.get(("", request.match_info["version"]))
        return _raw(doc) if doc else _not_found(request.path)

    async def apis(request: web.Request) -> web.Response:
        return _raw(groups_doc)

    async def apis_group(request: web.Request) -> web.Response:
        doc = group_docs.get(request.match_info["group"])
        return _raw(doc) if doc else _not_found(request.path)

    async def apis_group_version(request: web.Request) -> web.Response:
        doc = lists.get((request.match_info["group"], request.match_info["version"]))
        return _raw(doc) if doc else _not_found(request.path)

    async def version(request: web.Request) -> web.Response:
        return _raw(version_doc)

    for path, handler in (
        ("/api", api),
        ("/api/", api),
        ("/api/{version}", api_version),
        ("/api/{version}/", api_version),
        ("/apis", apis),
        ("/apis/", apis),
        ("/apis/{group}", apis_group),
        ("/apis/{group}/", apis_group),
        ("/apis/{group}/{version}", apis_group_version),
        ("/apis/{group}/{version}/", apis_group_version),
        ("/version", version),
        ("/version/", version),
    ):
        app.router.add_get(path, handler)


def _raw(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")
