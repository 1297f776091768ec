"""The DynamicResources plugin against an API server: informers for resource.k8s.io/v1 and the claim writer.

Three informers (ResourceSlices, DeviceClasses, ResourceClaims) feed the plugin's `put_*`/`remove_*`;
an object that does not parse is logged with the field named and treated as absent (a slice's
devices are not offered, a class or claim is missing), so the rest keeps being served. A claim is
parsed once per resourceVersion (`ParsedClaims`): the claim PreBind wrote is remembered with the
version the API server answered, so the informer's event for that write reuses it. PreBind
writes a claim's status with PUT .../resourceclaims/<name>/status carrying the resourceVersion
the scheduler read (`write_status_async` on the client's reactor, chained before the Binding; a
stale write is a 409 Conflict, the bind fails and the pod is retried once the informer brings the
claim as it is now); the answer is not parsed again where its status is the one written.
Whether the API serves resource.k8s.io/v1 is probed
once at start (`serves_dra`): without it the plugin stays idle, and pods with claims wait.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubenode.dra.types import (
    PARSERS,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    with_status,
)
from kubenode.kubeclient import (
    DEVICE_CLASSES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Forbidden,
    KubeClient,
    KubeError,
    NotFound,
)
from kubenode.kubeclient.informer import Informer
from kubenode.model.errors import ValidationError
from scheduler.dra.plugin import DynamicResources, WriteDone, written_claim

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"  # kube's resourceapi.Finalizer

log = logging.getLogger(__name__)


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


def _version(raw: Mapping[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion") or "")


class ParsedClaims:
    """The last parsed (or written) claim by key: an informer event for a resourceVersion already
    parsed, or that PreBind wrote, costs a lookup; a newer version of the same claim (same uid) keeps
    the spec parsed before, which is immutable, and parses only its status. Shared by the claim
    informer and ApiClaimWriter (the writer's answer and the watch event come in either order, on
    different threads)."""

    def __init__(self) -> None:
        self._parse = _decoder("ResourceClaim")
        self._lock = threading.Lock()
        self._claims: dict[str, ResourceClaim] = {}

    def decode(self, obj: dict[str, Any]) -> Decoded:
        key, version = _key(obj), _version(obj)
        with self._lock:
            cached = self._claims.get(key)
        if cached is not None:
            if version and _version(cached.raw) == version:
                return cached
            meta = obj.get("metadata") or {}
            if meta.get("uid") == cached.uid and obj.get("spec") == cached.raw.get("spec"):
                try:
                    claim = with_status(cached, obj)
                except ValidationError:
                    pass  # parsed in full below, which names the field
                else:
                    self.remember(claim)
                    return claim
        decoded = self._parse(obj)
        if isinstance(decoded, ResourceClaim):
            self.remember(decoded)
        return decoded

    def remember(self, claim: ResourceClaim) -> None:
        with self._lock:
            self._claims[claim.key] = claim

    def get(self, key: str, version: str) -> ResourceClaim | None:
        """The claim parsed for this resourceVersion, if it is the last one seen."""
        with self._lock:
            cached = self._claims.get(key)
        return cached if cached is not None and version and _version(cached.raw) == version else None

    def forget(self, key: str) -> None:
        with self._lock:
            self._claims.pop(key, None)


class DraInformers:
    def __init__(
        self, client: KubeClient, plugin: DynamicResources, claims: ParsedClaims | None = None
    ) -> None:
        self.plugin = plugin
        self.claims = claims or ParsedClaims()
        self.informers: list[Informer[Decoded]] = [
            Informer(
                client,
                resource,
                decode=self.claims.decode if resource is RESOURCE_CLAIMS else _decoder(resource.kind),
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
            self.claims.forget(obj.key)
            self.plugin.remove_claim(obj.key)
        elif "/" in obj:
            self.claims.forget(obj)
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
    """PreBind's writes: the claim's status, with the resourceVersion read (a stale one is a Conflict).
    The claim written is remembered in `claims`, so the watch event of that version is not parsed.
    A claim getting its allocation first gets kube's `resource.kubernetes.io/delete-protection` finalizer
    in a plain update (kube's bindClaim), so deleting it while pods use it leaves it (and its devices
    taken) until the resourceclaim controller deallocates it; a claim being deleted is not written."""

    def __init__(
        self,
        client: KubeClient,
        may_act: Callable[[], bool] = lambda: True,
        claims: ParsedClaims | None = None,
    ) -> None:
        self.client = client
        self.may_act = may_act
        self.claims = claims or ParsedClaims()

    def _body(self, raw: Mapping[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        if not self.may_act():
            raise RuntimeError("not leading: claim status not written")
        return {
            **raw,
            "apiVersion": RESOURCE_CLAIMS.api_version,
            "kind": "ResourceClaim",
            "status": status,
        }

    @staticmethod
    def _protected(claim: ResourceClaim, status: dict[str, Any]) -> dict[str, Any] | None:
        """The claim with the finalizer added, when this write allocates it and it lacks the finalizer."""
        meta = claim.raw.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            raise RuntimeError(f"claim {claim.key} got deleted in the meantime")
        finalizers = list(meta.get("finalizers") or [])
        if not status.get("allocation") or (claim.raw.get("status") or {}).get("allocation"):
            return None
        if DELETE_PROTECTION in finalizers:
            return None
        body = {**claim.raw, "metadata": {**meta, "finalizers": [*finalizers, DELETE_PROTECTION]}}
        return {**body, "apiVersion": RESOURCE_CLAIMS.api_version, "kind": "ResourceClaim"}

    def _written(self, claim: ResourceClaim, status: dict[str, Any], answer: dict[str, Any]) -> ResourceClaim:
        seen = self.claims.get(claim.key, _version(answer))  # the watch event came first
        if seen is not None:
            return seen
        written = written_claim(claim, status, answer)
        self.claims.remember(written)
        return written

    def write_status(self, claim: ResourceClaim, status: dict[str, Any]) -> ResourceClaim:
        raw: Mapping[str, Any] = claim.raw
        protected = self._protected(claim, status)
        if protected is not None:
            if not self.may_act():
                raise RuntimeError("not leading: claim status not written")
            raw = self.client.update(RESOURCE_CLAIMS, protected)
        answer = self.client.update(RESOURCE_CLAIMS, self._body(raw, status), subresource="status")
        return self._written(claim, status, answer)

    def write_status_async(self, claim: ResourceClaim, status: dict[str, Any], done: WriteDone) -> None:
        """`write_status` without waiting: `done` is called on the client's reactor thread."""
        protected = self._protected(claim, status)
        body = self._body(claim.raw, status)
        path = RESOURCE_CLAIMS.path(claim.namespace, claim.name, "status")

        def answered(answer: dict[str, Any] | None, error: KubeError | None) -> None:
            if error is not None or answer is None:
                done(None, error or KubeError(f"no answer writing claim {claim.key}"))
                return
            try:
                written = self._written(claim, status, answer)
            except Exception as exc:  # an answer that does not parse: the bind fails, the pod retries
                done(None, exc)
                return
            done(written, None)

        def finalized(answer: dict[str, Any] | None, error: KubeError | None) -> None:
            if error is not None or answer is None:
                done(None, error or KubeError(f"no answer adding the finalizer to claim {claim.key}"))
                return
            try:
                self.client.request_async("PUT", path, answered, body=self._body(answer, status))
            except Exception as exc:  # refused before sending (e.g. no longer leading)
                done(None, exc)

        if protected is not None:
            main = RESOURCE_CLAIMS.path(claim.namespace, claim.name)
            self.client.request_async("PUT", main, finalized, body=protected)
            return
        self.client.request_async("PUT", path, answered, body=body)
