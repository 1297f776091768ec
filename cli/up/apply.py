"""Apply a directory of manifests through the API with `kubectl apply`'s outcome: created, configured or
unchanged. Pods and the ConfigMaps they read (applied first, so the pods' volumes find them).

Each object is created with the `kubectl.kubernetes.io/last-applied-configuration` annotation kubectl
writes; when it exists already, a strategic merge patch sets the labels and annotations (a pod's spec is
immutable beyond that, so a changed spec is reported rather than forced). The pods carry no nodeName: the
scheduler places them, as it would those of `kubectl apply -f examples/pods/`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubenode import yamlload
from kubenode.kubeclient import PODS, AlreadyExists, KubeClient, Resource

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
APPLIED_KINDS = ("Pod", "ConfigMap")
CONFIGMAPS = Resource("configmaps", "ConfigMap")


class ManifestError(Exception):
    """A manifest that cannot be applied; the message names the file."""


@dataclass(frozen=True)
class Applied:
    namespace: str
    name: str
    outcome: str  # created | configured | unchanged
    spec: dict[str, Any]


def read_manifests(directory: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every object in the directory's manifest files, in file-name order."""
    objects = []
    for path in sorted(directory.iterdir()):
        if path.suffix not in MANIFEST_SUFFIXES or path.name.startswith("."):
            continue
        try:
            documents = yamlload.load_all(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ManifestError(f"{path}: {exc}") from None
        for document in documents:
            if document is None:
                continue
            if not isinstance(document, dict) or document.get("kind") not in APPLIED_KINDS:
                kind = document.get("kind") if isinstance(document, dict) else type(document).__name__
                raise ManifestError(f"{path}: kind {kind!r}: only Pods and ConfigMaps are applied")
            if not (document.get("metadata") or {}).get("name"):
                raise ManifestError(f"{path}: metadata.name is required")
            objects.append((path, document))
    return objects


def last_applied(manifest: dict[str, Any], namespace: str) -> str:
    """The annotation's value exactly as kubectl writes it (so a later `kubectl apply` of the same file says
    unchanged): the object with its namespace and its annotations minus this one, as Go's json.Marshal
    encodes it (sorted keys, compact, <, > and & escaped) with a newline."""
    meta = dict(manifest.get("metadata") or {})
    meta["namespace"] = namespace
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    text = json.dumps(
        {**manifest, "metadata": meta}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") + "\n"


def apply_object(client: KubeClient, manifest: dict[str, Any]) -> Applied:
    """A Pod or a ConfigMap (whose data, unlike a pod's spec, is replaced when it changed)."""
    return (
        apply_pod(client, manifest) if manifest.get("kind") == "Pod" else _apply(client, CONFIGMAPS, manifest)
    )


def apply_pod(client: KubeClient, manifest: dict[str, Any]) -> Applied:
    return _apply(client, PODS, manifest)


def _apply(client: KubeClient, resource: Resource, manifest: dict[str, Any]) -> Applied:
    meta = manifest.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    name = meta["name"]
    applied = last_applied(manifest, namespace)
    body = {
        **manifest,
        "metadata": {**meta, "namespace": namespace, "annotations": {**(meta.get("annotations") or {})}},
    }
    body["metadata"]["annotations"][LAST_APPLIED] = applied
    try:
        client.create(resource, body, namespace)
        return Applied(namespace, name, "created", manifest.get("spec") or {})
    except AlreadyExists:
        pass
    current = client.get(resource, name, namespace)
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    if annotations.get(LAST_APPLIED) == applied:
        return Applied(namespace, name, "unchanged", manifest.get("spec") or {})
    patch: dict[str, Any] = {
        "metadata": {"labels": meta.get("labels") or {}, "annotations": body["metadata"]["annotations"]}
    }
    if resource is CONFIGMAPS:
        patch["data"] = manifest.get("data") or {}
    client.patch(resource, name, patch, namespace)
    return Applied(namespace, name, "configured", manifest.get("spec") or {})
