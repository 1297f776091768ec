"""Lease helpers (coordination.k8s.io/v1): read, create-or-renew, and a renewing thread.

`renew_lease` is what the kubelet's lease controller does each interval: GET the Lease; if
it is missing, POST a new one; otherwise PUT it back with its resourceVersion (a
concurrent writer makes that a 409, and the next round reads again), the holder, the
duration and a fresh `renewTime` (MicroTime, six fractional digits). Given the Lease as the
last renewal stored it (`latest`), it skips the GET and PUTs that, as the kubelet's lease
controller does once it holds a `latestLease`: a heartbeat is one request, not two, which at
a thousand nodes is 100 GETs a second less. `LeaseRenewer` runs it every `interval` (with
4 % jitter, as the kubelet), keeping the stored Lease between rounds and dropping it after
any failure (the next round reads again), and after a failure retries with a backoff from
200 ms doubling to 7 s. Leader election (`leaderelection.py`) builds on the
same helpers.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from kubenode.kubeclient.client import LEASES, KubeClient
from kubenode.kubeclient.errors import KubeError, NotFound
from kubenode.kubeclient.timefmt import micro_time

log = logging.getLogger(__name__)

RETRY_INITIAL_S = 0.2  # the lease controller's ensure-lease backoff
RETRY_MAX_S = 7.0
JITTER = 0.04


def lease_body(
    namespace: str,
    name: str,
    holder: str,
    duration_s: int,
    renew_wall: float,
    *,
    acquire_wall: float | None = None,
    transitions: int | None = None,
    owner_references: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration_s,
        "renewTime": micro_time(renew_wall),
    }
    if acquire_wall is not None:
        spec["acquireTime"] = micro_time(acquire_wall)
    if transitions is not None:
        spec["leaseTransitions"] = transitions
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner_references:
        metadata["ownerReferences"] = owner_references
    return {"apiVersion": LEASES.api_version, "kind": LEASES.kind, "metadata": metadata, "spec": spec}


def get_lease(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return client.get(LEASES, name, namespace)
    except NotFound:
        return None


def renew_lease(
    client: KubeClient,
    namespace: str,
    name: str,
    holder: str,
    duration_s: int,
    *,
    wall: Callable[[], float] = time.time,
    owner_references: list[dict[str, Any]] | None = None,
    latest: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Create the Lease, or renew it by PUT with its resourceVersion (of `latest`, the Lease this holder
    last stored, else of a GET); returns the stored Lease."""
    current = latest if latest is not None else get_lease(client, namespace, name)
    now = wall()
    if current is None:
        body = lease_body(namespace, name, holder, duration_s, now, owner_references=owner_references)
        return client.create(LEASES, body, namespace)
    updated = dict(current)
    spec = dict(updated.get("spec") or {})
    spec.update(holderIdentity=holder, leaseDurationSeconds=duration_s, renewTime=micro_time(now))
    updated["spec"] = spec
    if owner_references and not (updated.get("metadata") or {}).get("ownerReferences"):
        updated["metadata"] = {**updated["metadata"], "ownerReferences": owner_references}
    return client.update(LEASES, updated)


class LeaseRenewer:
    """Renews one Lease every `interval` on its own thread until stopped."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        holder: str,
        *,
        duration_s: int = 40,
        interval: float = 10.0,
        owner_references: Callable[[], list[dict[str, Any]] | None] = lambda: None,
        wall: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        retry_initial: float = RETRY_INITIAL_S,
        retry_max: float = RETRY_MAX_S,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.holder = holder
        self.duration_s = duration_s
        self.interval = interval
        self.owner_references = owner_references
        self._wall = wall
        self._rand = rand
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.renewals = 0
        self.last_error: str = ""
        self._latest: dict[str, Any] | None = None  # the Lease as the last renewal stored it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"lease-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def renew_once(self) -> bool:
        latest, self._latest = self._latest, None  # kept only if this renewal succeeds
        try:
            self._latest = renew_lease(
                self.client,
                self.namespace,
                self.name,
                self.holder,
                self.duration_s,
                wall=self._wall,
                owner_references=self.owner_references(),
                latest=latest,
            )
        except KubeError as exc:
            self.last_error = str(exc)
            log.warning("renewing lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        except Exception as exc:  # a bug must not end the heartbeat: logged in full, tried again
            self.last_error = str(exc)
            log.exception("renewing lease %s/%s", self.namespace, self.name)
            return False
        self.renewals += 1
        self.last_error = ""
        return True

    def _run(self) -> None:
        retry = self.retry_initial
        while not self._stop.is_set():
            if self.renew_once():
                retry = self.retry_initial
                wait = self.interval * (1 + JITTER * self._rand())
            else:
                wait, retry = retry, min(retry * 2, self.retry_max)
            if self._stop.wait(wait):
                return
