"""ConfigMaps and Secrets for the pods' volumes and env: the kubelet's configmap and secret managers.

The kubelet's managers (pkg/kubelet/configmap, pkg/kubelet/secret over pkg/kubelet/util/manager) fetch only
the objects its pods reference, one by one, which is all the Node authorizer lets a node read. This is the
TTL cache strategy of util/manager: `get(resource, namespace, name)` answers from a cache entry younger than
`ttl` and GETs the object otherwise, so one sync that reads a ConfigMap for three volumes and an env var
asks the API server once, and an edited object is seen at most `ttl` after it changed (the kubelet's
default TTL is one minute; ours is shorter by default, see AgentConfig.configObjectTTL).

`ConfigObject.data` holds the decoded bytes of every key: a ConfigMap's `data` (UTF-8) and `binaryData`
(base64), a Secret's `data` (base64). `None` means the object does not exist. Anything else that goes wrong
(the server cannot be reached, 403) raises `ConfigLookupError` with a message that never holds a value.

The agent works without a cluster (manifests only): then `NO_OBJECTS` answers every lookup with an error
saying there is no API server to read the object from.
"""

from __future__ import annotations

import base64
import binascii
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubenode.model import Pod

CONFIGMAPS = "configmaps"
SECRETS = "secrets"
KIND_WORD = {CONFIGMAPS: "configmap", SECRETS: "secret"}  # as the kubelet's errors name them


class ConfigLookupError(Exception):
    """The object could not be read (no server, forbidden, undecodable); the message names it."""


@dataclass(frozen=True)
class ConfigObject:
    resource: str
    namespace: str
    name: str
    data: Mapping[str, bytes]


class ConfigObjects(Protocol):
    def get(self, resource: str, namespace: str, name: str) -> ConfigObject | None:
        """The object, None if it does not exist; ConfigLookupError if that cannot be known."""

    def forget_except(self, wanted: set[tuple[str, str, str]]) -> None:
        """Drop what no pod references any more (called by housekeeping)."""


def pod_references(pod: Pod) -> set[tuple[str, str, str]]:
    """(resource, namespace, name) of every ConfigMap and Secret the pod's volumes and env name."""
    refs = set()
    for volume in pod.volumes:
        for source in volume.projections:
            if source.kind in ("configMap", "secret"):
                refs.add((CONFIGMAPS if source.kind == "configMap" else SECRETS, pod.namespace, source.name))
    for container in pod.all_containers:
        refs.update((source.resource, pod.namespace, source.name) for source in container.env_from)
        refs.update((var.key_ref[0], pod.namespace, var.key_ref[1]) for var in container.env if var.key_ref)
    return refs


def not_found(resource: str, name: str) -> str:
    """The kubelet's text for a missing object: `configmap "app" not found`."""
    return f'{KIND_WORD[resource]} "{name}" not found'


class _NoObjects:
    def get(self, resource: str, namespace: str, name: str) -> ConfigObject | None:
        raise ConfigLookupError(
            f"{KIND_WORD[resource]} {namespace}/{name}: the agent has no API server to read it from"
        )

    def forget_except(self, wanted: set[tuple[str, str, str]]) -> None:
        pass


NO_OBJECTS: ConfigObjects = _NoObjects()


def decode_object(resource: str, obj: Mapping[str, Any]) -> ConfigObject:
    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    data: dict[str, bytes] = {}
    try:
        if resource == CONFIGMAPS:
            for key, value in (obj.get("data") or {}).items():
                data[str(key)] = str(value).encode()
            for key, value in (obj.get("binaryData") or {}).items():
                data[str(key)] = base64.b64decode(str(value), validate=True)
        else:
            for key, value in (obj.get("data") or {}).items():
                data[str(key)] = base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigLookupError(
            f"{KIND_WORD[resource]} {namespace}/{name}: a value is not valid base64"
        ) from None
    return ConfigObject(resource, namespace, name, data)


class CachedConfigObjects:
    """The TTL cache over a fetch function (the API: GET one object; None when it is not found)."""

    def __init__(
        self,
        fetch: Callable[[str, str, str], Mapping[str, Any] | None],
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, str], tuple[float, ConfigObject | None]] = {}
        self.fetches = 0

    def get(self, resource: str, namespace: str, name: str) -> ConfigObject | None:
        key = (resource, namespace, name)
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and now - entry[0] < self.ttl:
            return entry[1]
        raw = self._fetch(resource, namespace, name)
        self.fetches += 1
        value = None if raw is None else decode_object(resource, raw)
        with self._lock:
            self._entries[key] = (now, value)
        return value

    def forget_except(self, wanted: set[tuple[str, str, str]]) -> None:
        """Drop the entries no pod references any more (the kubelet's UnregisterPod)."""
        with self._lock:
            for key in [k for k in self._entries if k not in wanted]:
                del self._entries[key]


def api_fetcher(client: Any) -> Callable[[str, str, str], Mapping[str, Any] | None]:
    """GET one ConfigMap or Secret through the shared client; NotFound is None, other failures raise
    ConfigLookupError naming the object (never its data)."""
    from kubenode.kubeclient import KubeError, NotFound, Resource

    resources = {CONFIGMAPS: Resource(CONFIGMAPS, "ConfigMap"), SECRETS: Resource(SECRETS, "Secret")}

    def fetch(resource: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            return dict(client.get(resources[resource], name, namespace))
        except NotFound:
            return None
        except KubeError as exc:
            raise ConfigLookupError(f"cannot read {KIND_WORD[resource]} {namespace}/{name}: {exc}") from None

    return fetch
