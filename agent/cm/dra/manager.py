"""The DRA manager (the kubelet's cm/dra Manager): prepare a pod's claims before its containers start,
unprepare them after its containers are gone.

`prepare(pod)`: every claim the pod names is read from the API server and must be allocated and
reserved for the pod (else ClaimPrepareError: a pod event and a retry with backoff, no container
starts) -> claims not yet prepared are checkpointed as "preparing" (checkpoint.py), then each driver's
NodePrepareResources is called once with its claims (plugins.py), then the claims are checkpointed
"prepared" with the devices each driver answered -> the answer: per container the prepared devices
of the claims (and requests) it references, and the CPUs of kubenode's CPU driver for the pod's cpuset.
A claim shared by several pods is prepared once and gains the pod.
`unprepare(pod_uid)`: the pod leaves its claims; a claim no pod holds any more goes to its drivers'
NodeUnprepareResources and out of the checkpoint. A failure keeps the claim in the checkpoint, where
`retry_unprepare` (called whenever a driver registers, and at every unprepare) finds it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.cm.dra.checkpoint import PREPARED, ClaimEntry, ClaimStore
from agent.cm.dra.errors import ClaimPrepareError
from agent.cm.dra.plugins import ClaimRef, DriverCallError, DriverRegistry, PreparedDevice
from agent.cm.dra.podclaims import PodClaimError, container_claims, device_serves, pod_claims
from kubenode.devicecontract import dra_cpu
from kubenode.model import Pod

log = logging.getLogger("agent.dra")

# (namespace, name) -> the ResourceClaim as JSON (raises when it cannot be read)
ClaimGetter = Callable[[str, str], Mapping[str, Any]]


@dataclass(frozen=True)
class DynamicDevice:
    claim: str  # the ResourceClaim's name
    namespace: str
    driver: str
    pool: str
    device: str
    cdi_ids: tuple[str, ...]


@dataclass
class PodDynamicResources:
    containers: dict[str, list[DynamicDevice]] = field(default_factory=dict)
    cpus: set[int] = field(default_factory=set)

    def cdi_ids(self, container: str) -> list[str]:
        return list(dict.fromkeys(i for d in self.containers.get(container, []) for i in d.cdi_ids))


NO_DYNAMIC = PodDynamicResources()


class DRAManager:
    def __init__(self, store: ClaimStore, registry: DriverRegistry, get_claim: ClaimGetter) -> None:
        self.store = store
        self.registry = registry
        self._get_claim = get_claim
        self._by_pod: dict[str, PodDynamicResources] = {}  # the last answer per pod, for PodResources

    def prepare(self, pod: Pod) -> PodDynamicResources:
        try:
            wanted = pod_claims(pod.raw)
        except PodClaimError as exc:
            raise ClaimPrepareError(str(exc)) from None
        if not wanted:
            return NO_DYNAMIC
        claims: dict[str, tuple[str, ClaimRef, list[str]]] = {}  # pod claim name -> (uid, ref, drivers)
        for pc in wanted:
            claim = self._read(pod, pc.claim_name)
            uid = str(claim["metadata"]["uid"])
            results = claim["status"]["allocation"].get("devices", {}).get("results") or []
            drivers = sorted({str(r.get("driver")) for r in results})
            claims[pc.pod_name] = (uid, ClaimRef(pod.namespace, pc.claim_name, uid), drivers)
        with self.store.lock:
            fresh, changed = [], False
            for uid, ref, drivers in claims.values():
                entry = self.store.claims.get(uid)
                if entry is None:
                    entry = self.store.claims[uid] = ClaimEntry(ref, drivers)
                changed |= pod.uid not in entry.pods
                entry.pods.add(pod.uid)
                if entry.state != PREPARED:
                    fresh.append(entry)
            if changed or fresh:
                self.store.save()  # "preparing" on disk before any driver is called
            if fresh:
                self._prepare_entries(fresh)
            result = self._by_pod[pod.uid] = self._resources(
                pod, {n: uid for n, (uid, _, _) in claims.items()}
            )
            return result

    def _read(self, pod: Pod, name: str) -> Mapping[str, Any]:
        try:
            claim = self._get_claim(pod.namespace, name)
        except Exception as exc:
            raise ClaimPrepareError(f"reading ResourceClaim {pod.namespace}/{name}: {exc}") from None
        status = claim.get("status") or {}
        if not status.get("allocation"):
            raise ClaimPrepareError(f"ResourceClaim {pod.namespace}/{name} is not allocated yet")
        reserved = {str(r.get("uid")) for r in status.get("reservedFor") or []}
        if pod.uid not in reserved:
            raise ClaimPrepareError(f"ResourceClaim {pod.namespace}/{name} is not reserved for the pod yet")
        return claim

    def _prepare_entries(self, entries: list[ClaimEntry]) -> None:
        by_driver: dict[str, list[ClaimEntry]] = {}
        for entry in entries:
            for driver in entry.drivers:
                if driver not in entry.devices:
                    by_driver.setdefault(driver, []).append(entry)
        errors = []
        for driver, batch in sorted(by_driver.items()):
            client = self.registry.get(driver)
            if client is None:
                errors.append(f"DRA driver {driver} is not registered")
                continue
            try:
                answers = client.prepare([e.ref for e in batch])
            except DriverCallError as exc:
                errors.append(str(exc))
                continue
            for entry in batch:
                answer = answers[entry.ref.uid]
                if isinstance(answer, str):
                    errors.append(f"claim {entry.ref.namespace}/{entry.ref.name}: {answer}")
                else:
                    entry.devices[driver] = answer
        for entry in entries:
            if all(d in entry.devices for d in entry.drivers):
                entry.state = PREPARED
        self.store.save(durable=False)  # lost in a power cut: "preparing" again, prepared again (idempotent)
        if errors:
            raise ClaimPrepareError("; ".join(errors))

    def _resources(self, pod: Pod, uid_of: Mapping[str, str]) -> PodDynamicResources:
        result = PodDynamicResources()
        for container, refs in container_claims(pod.raw).items():
            devices = []
            for pod_claim, request in refs:
                entry = self.store.claims.get(uid_of.get(pod_claim, ""))
                if entry is None:
                    continue
                for driver, prepared in sorted(entry.devices.items()):
                    devices += [
                        _dynamic(entry, driver, d) for d in prepared if device_serves(d.requests, request)
                    ]
            if devices:
                result.containers[container] = devices
        for uid in uid_of.values():
            entry = self.store.claims.get(uid)
            for driver, prepared in (entry.devices if entry is not None else {}).items():
                result.cpus |= {cpu for d in prepared if (cpu := dra_cpu(driver, d.device)) is not None}
        return result

    def resources(self, pod: Pod) -> PodDynamicResources:
        """What `prepare` answered for the pod, from the checkpoint (no API read, no driver call)."""
        with self.store.lock:
            held = self.store.of_pod(pod.uid)
            if not held:
                return NO_DYNAMIC
            by_name = {e.ref.name: e.ref.uid for e in held}
            try:
                uid_of = {pc.pod_name: by_name.get(pc.claim_name, "") for pc in pod_claims(pod.raw)}
            except PodClaimError:
                return NO_DYNAMIC
            result = self._by_pod[pod.uid] = self._resources(pod, uid_of)
            return result

    def dynamic_for(self, pod_uid: str, container: str) -> list[DynamicDevice]:
        """The container's prepared devices as last answered (PodResources' dynamic resources)."""
        with self.store.lock:
            return list(self._by_pod.get(pod_uid, NO_DYNAMIC).containers.get(container, []))

    def holders(self) -> set[str]:
        with self.store.lock:
            return {uid for entry in self.store.claims.values() for uid in entry.pods}

    def unprepare(self, pod_uid: str) -> None:
        """The pod's containers are gone: release its claims (ClaimPrepareError when a driver failed)."""
        with self.store.lock:
            self._by_pod.pop(pod_uid, None)
            for entry in self.store.of_pod(pod_uid):
                entry.pods.discard(pod_uid)
            self.store.save()
            self.retry_unprepare()

    def retry_unprepare_quietly(self, registered: str) -> None:
        """A driver registered: unprepare what waited for it; what still fails is logged, kept and retried."""
        try:
            self.retry_unprepare()
        except ClaimPrepareError as exc:
            log.warning("unprepare after %s registered: %s", registered, exc)

    def retry_unprepare(self) -> None:
        """Unprepare every claim no pod holds any more; raises ClaimPrepareError naming what failed."""
        errors = []
        with self.store.lock:
            orphans = [e for e in self.store.claims.values() if not e.pods]
            by_driver: dict[str, list[ClaimEntry]] = {}
            for entry in orphans:
                for driver in entry.drivers:
                    by_driver.setdefault(driver, []).append(entry)
            failed: set[str] = set()
            for driver, batch in sorted(by_driver.items()):
                client = self.registry.get(driver)
                if client is None:
                    errors.append(f"DRA driver {driver} is not registered")
                    failed |= {e.ref.uid for e in batch}
                    continue
                try:
                    answers = client.unprepare([e.ref for e in batch])
                except DriverCallError as exc:
                    errors.append(str(exc))
                    failed |= {e.ref.uid for e in batch}
                    continue
                for entry in batch:
                    if answers[entry.ref.uid]:
                        errors.append(
                            f"claim {entry.ref.namespace}/{entry.ref.name}: {answers[entry.ref.uid]}"
                        )
                        failed.add(entry.ref.uid)
            for entry in orphans:
                if entry.ref.uid not in failed:
                    del self.store.claims[entry.ref.uid]
                    log.info("claim %s/%s unprepared", entry.ref.namespace, entry.ref.name)
            if orphans:
                self.store.save(durable=False)  # lost in a power cut: unprepared again (no-op for drivers)
        if errors:
            raise ClaimPrepareError("; ".join(errors))


def _dynamic(entry: ClaimEntry, driver: str, device: PreparedDevice) -> DynamicDevice:
    return DynamicDevice(
        entry.ref.name, entry.ref.namespace, driver, device.pool, device.device, device.cdi_ids
    )
