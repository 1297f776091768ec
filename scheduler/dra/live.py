"""The DynamicResources plugin against an API server: informers for resource.k8s.io/v1 and the claim writer.

Three informers (ResourceSlices, DeviceClasses, ResourceClaims) feed the plugin's `put_*`/`remove_*`;
an object that does not parse is logged with the field named and treated as absent (a slice's
devices are not offered, a class or claim is missing), so the rest keeps being served. PreBind
writes a claim's status with PUT .../resourceclaims/<name>/status carrying the resourceVersion
the scheduler read: a stale write is a 409 Conflict, the bind fails and the pod is retried once
the informer brings the claim as it is now. Whether the API serves resource.k8s.io/v1 is probed
once at start (`serves_dra`): without it the plugin stays idle, and pods with claims wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubenode.dra.types import (
    PARSERS,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    parse_resource_claim,
)
from kubenode.kubeclient import Forbidden, KubeClient, KubeError, NotFound, Resource
from kubenode.kubeclient.informer import Informer
from kubenode.model.errors import ValidationError
from scheduler.dra.plugin import DynamicResources

log = logging.getLogger(__name__)

GROUP, VERSION = "resource.k8s.io", "v1"
RESOURCE_SLICES = Resource("resourceslices", "ResourceSlice", group=GROUP, version=VERSION, namespaced=False)
DEVICE_CLASSES = Resource("deviceclasses", "DeviceClass", group=GROUP, version=VERSION, namespaced=False)
RESOURCE_CLAIMS = Resource("resourceclaims", "ResourceClaim", group=GROUP, version=VERSION)

Decoded = (
    ResourceSlice | DeviceClass | ResourceClaim | str
)  # str: the name (key) of an object that did not parse


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _decoder(kind: str) -> Callable[[dict[str, Any]], Decoded]:
    parse = PARSERS[kind]

    def decode(obj: dict[str, Any]) -> Decoded:
        try:
            return parse(obj, "")
        except ValidationError as exc:
            log.warning("%s %s ignored: %s", kind, _key(obj), exc)
        except Exception as exc:  # a decoder must not raise: the informer goes on
            log.warning("%s %s ignored: cannot decode: %s", kind, _key(obj), exc)
        return _key(obj)

    return decode


class DraInformers:
    def __init__(self, client: KubeClient, plugin: DynamicResources) -> None:
        self.plugin = plugin
        self.informers: list[Informer[Decoded]] = [
            Informer(
                client,
                resource,
                decode=_decoder(resource.kind),
                on_add=self._put,
                on_update=lambda old, new: self._put(new),
                on_delete=self._remove,
                name=resource.plural,
            )
            for resource in (RESOURCE_SLICES, DEVICE_CLASSES, RESOURCE_CLAIMS)
        ]

    def _put(self, obj: Decoded) -> None:
        if isinstance(obj, ResourceSlice):
            self.plugin.put_slice(obj)
        elif isinstance(obj, DeviceClass):
            self.plugin.put_class(obj)
        elif isinstance(obj, ResourceClaim):
            self.plugin.put_claim(obj)
        else:  # did not parse: as good as absent
            self._remove(obj)

    def _remove(self, obj: Decoded) -> None:
        if isinstance(obj, ResourceSlice):
            self.plugin.remove_slice(obj.name)
        elif isinstance(obj, DeviceClass):
            self.plugin.remove_class(obj.name)
        elif isinstance(obj, ResourceClaim):
            self.plugin.remove_claim(obj.key)
        elif "/" in obj:
            self.plugin.remove_claim(obj)
        else:
            self.plugin.remove_slice(obj)
            self.plugin.remove_class(obj)

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    def synced(self) -> bool:
        return all(informer.has_synced.is_set() for informer in self.informers)


def serves_dra(client: KubeClient) -> bool:
    """Whether the API serves resource.k8s.io/v1 and lets this scheduler read it."""
    try:
        client.list(DEVICE_CLASSES, limit=1)
    except NotFound:
        log.info("the API serves no resource.k8s.io/v1: DynamicResources stays idle")
        return False
    except Forbidden as err:
        log.warning("resource.k8s.io/v1 may not be read (%s): DynamicResources stays idle", err)
        return False
    except KubeError as err:  # the informers retry; scheduling waits for them
        log.warning("listing DeviceClasses: %s", err)
    return True


class ApiClaimWriter:
    """PreBind's writes: the claim's status, with the resourceVersion read (a stale one is a Conflict)."""

    def __init__(self, client: KubeClient, may_act: Callable[[], bool] = lambda: True) -> None:
        self.client = client
        self.may_act = may_act

    def write_status(self, claim: ResourceClaim, status: dict[str, Any]) -> ResourceClaim:
        if not self.may_act():
            raise RuntimeError("not leading: claim status not written")
        body = {**claim.raw, "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim", "status": status}
        return parse_resource_claim(self.client.update(RESOURCE_CLAIMS, body, subresource="status"))
