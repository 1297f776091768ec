"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Flow (client-go tools/leaderelection): `run()` tries to acquire the Lease every
retryPeriod until it holds it, calls `on_started_leading`, then renews every
retryPeriod. A renewal that has not succeeded within renewDeadline of the last one
ends leadership: `on_stopped_leading` runs and `run()` returns False; the caller (the
scheduler) stops work at once and exits non-zero, as kube-scheduler does, so the
process supervisor restarts it as a follower.

One try (tryAcquireOrRenew): GET the Lease; create it if it does not exist. A Lease
held by someone else is respected while the follower's OWN observation of its last
change is younger than leaseDurationSeconds; followers never compare clocks with the
holder. Taking over (or renewing) is a PUT carrying the resourceVersion that was read,
so of two contenders one gets 409 and loses. leaseTransitions goes up by one on each
change of holder. Times are MicroTime with exactly 6 fractional digits (Go's decoder
rejects anything else). `release()` (on a clean stop) empties holderIdentity so a
follower need not wait out the lease.

The Lease is read and written through `LeaseStore`, so the logic can be tested against an
in-memory store and run against any API server through the shared transport.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubenode.kubeclient.client import LEASES, KubeClient
from kubenode.kubeclient.errors import Conflict
from kubenode.kubeclient.lease import get_lease, lease_body
from kubenode.kubeclient.timefmt import micro_time

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "kube-system"
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
JITTER_FACTOR = 1.2  # client-go's JitterFactor for the acquire loop


class LeaseConflict(Exception):
    """The write lost a race (HTTP 409): someone else changed or created the Lease."""


class LeaseStore(Protocol):
    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Lease, or None if it does not exist. Raises on any other failure."""

    def create(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        """Create it; LeaseConflict if it exists."""

    def update(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        """PUT it (with metadata.resourceVersion); LeaseConflict on a stale version."""


class ClientLeaseStore:
    """LeaseStore over the shared client: GET, POST, PUT; a 409 becomes LeaseConflict."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return get_lease(self.client, namespace, name)

    def create(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self.client.create(LEASES, lease, namespace)
        except Conflict as exc:
            raise LeaseConflict(str(exc)) from None

    def update(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self.client.update(LEASES, lease)
        except Conflict as exc:
            raise LeaseConflict(str(exc)) from None


def default_identity() -> str:
    """<hostname>_<uuid>, as kube-scheduler builds its identity."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class ElectionConfig:
    name: str
    namespace: str = DEFAULT_NAMESPACE
    identity: str = ""
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD

    def problem(self) -> str | None:
        """client-go's NewLeaderElector checks, as one line naming the setting, or None."""
        if self.lease_duration <= self.renew_deadline:
            return "leaseDuration must be greater than renewDeadline"
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            return "renewDeadline must be greater than retryPeriod*1.2"
        if self.lease_duration < 1 or self.renew_deadline < 1 or self.retry_period < 1:
            return "leaseDuration, renewDeadline and retryPeriod must be at least 1 s"
        if not self.name:
            return "the lock object needs a name"
        return None


class LeaderElector:
    def __init__(
        self,
        store: LeaseStore,
        config: ElectionConfig,
        *,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        on_new_leader: Callable[[str], None] = lambda identity: None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        problem = config.problem()
        if problem:
            raise ValueError(problem)
        self.store = store
        self.config = config
        self.identity = config.identity or default_identity()
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock
        self._wall = wall_clock
        self._observed: dict[str, Any] = {}  # the last spec seen
        self._observed_at = 0.0  # our monotonic clock when it last changed
        self._observed_rv = ""
        self._reported_leader = ""
        self._leading = threading.Event()
        self._lock = threading.Lock()
        self.last_renewal = 0.0  # monotonic time of the last successful acquire/renew

    # --- state ------------------------------------------------------------------------
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def leader(self) -> str:
        return str(self._observed.get("holderIdentity") or "")

    def health_problem(self, tolerance: float = 20.0) -> str | None:
        """For /healthz: a leader that has not renewed for leaseDuration + tolerance is unhealthy
        (client-go's HealthzAdaptor)."""
        if not self.is_leader():
            return None
        late = self._clock() - self.last_renewal - self.config.lease_duration
        return f"leader lease expired {late:.1f}s ago" if late > tolerance else None

    # --- one try ----------------------------------------------------------------------
    def _spec(self, acquire_time: str, transitions: int, now: float) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self.config.lease_duration),
            "acquireTime": acquire_time,
            "renewTime": micro_time(now),
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: Mapping[str, Any], resource_version: str) -> None:
        if dict(spec) != self._observed:
            self._observed = dict(spec)
            self._observed_at = self._clock()
        self._observed_rv = resource_version
        leader = str(spec.get("holderIdentity") or "")
        if leader and leader != self._reported_leader:
            self._reported_leader = leader
            self._on_new_leader(leader)

    def try_acquire_or_renew(self) -> bool:
        """One GET then create or PUT. True if we hold the Lease afterwards."""
        wall = self._wall()
        now = micro_time(wall)
        lease = self.store.get(self.config.namespace, self.config.name)
        if lease is None:
            duration = round(self.config.lease_duration)
            body = lease_body(
                self.config.namespace,
                self.config.name,
                self.identity,
                duration,
                wall,
                acquire_wall=wall,
                transitions=0,
            )
            spec = body["spec"]
            try:
                created = self.store.create(self.config.namespace, body)
            except LeaseConflict:
                return False
            self._observe(created.get("spec") or spec, _rv(created))
            return True
        spec = lease.get("spec") or {}
        self._observe(spec, _rv(lease))
        holder = str(spec.get("holderIdentity") or "")
        held_for = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        mine = holder == self.identity
        if holder and not mine and self._clock() < self._observed_at + held_for:
            return False  # someone else holds an unexpired lease, as far as WE have seen
        transitions = int(spec.get("leaseTransitions") or 0)
        if mine:
            acquire_time = str(spec.get("acquireTime") or now)
        else:
            acquire_time, transitions = now, transitions + 1
        body = dict(lease)
        body["spec"] = {**spec, **self._spec(acquire_time, transitions, wall)}
        try:
            updated = self.store.update(self.config.namespace, self.config.name, body)
        except LeaseConflict:
            return False
        self._observe(updated.get("spec") or body["spec"], _rv(updated))
        return True

    def _try(self) -> bool:
        try:
            ok = self.try_acquire_or_renew()
        except Exception as exc:  # the API server is down or refused: retry, as client-go does
            log.warning("leader election: %s/%s: %s", self.config.namespace, self.config.name, exc)
            return False
        if ok:
            self.last_renewal = self._clock()
        return ok

    # --- loops ------------------------------------------------------------------------
    def acquire(self, stop: threading.Event) -> bool:
        """Try every retryPeriod (jittered) until we lead; False if stop was set first."""
        log.info("leader election: %s trying to acquire %s/%s", self.identity, *self._where())
        while not stop.is_set():
            if self._try():
                log.info("leader election: %s acquired %s/%s", self.identity, *self._where())
                return True
            stop.wait(self.config.retry_period * (1 + random.random() * (JITTER_FACTOR - 1)))
        return False

    def renew(self, stop: threading.Event) -> bool:
        """Renew every retryPeriod while leading. Each round retries every retryPeriod; a round
        that has not renewed within renewDeadline ends leadership (returns False). True if stopped."""
        while not stop.wait(self.config.retry_period):
            deadline = self._clock() + self.config.renew_deadline
            while not self._try():
                left = deadline - self._clock()
                if left <= 0 or stop.is_set():
                    return stop.is_set()
                stop.wait(min(self.config.retry_period, left))
        return True

    def run(self, stop: threading.Event) -> bool:
        """Acquire, lead, renew. Returns True after a clean stop, False if leadership was lost."""
        if not self.acquire(stop):
            return True
        self._leading.set()
        self._on_started()
        kept = self.renew(stop)
        self._leading.clear()
        if kept:
            self.release()
        else:
            log.error("leader election: %s lost %s/%s", self.identity, *self._where())
        self._on_stopped()
        return kept

    def release(self) -> None:
        """Give the Lease up (clean shutdown): empty holder, 1 s duration, as client-go's
        ReleaseOnCancel does, so a follower takes over without waiting for expiry."""
        try:
            lease = self.store.get(self.config.namespace, self.config.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            body = dict(lease)
            now = micro_time(self._wall())
            body["spec"] = {
                **lease["spec"],
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": now,
                "acquireTime": now,
            }
            self.store.update(self.config.namespace, self.config.name, body)
        except Exception as exc:  # best effort: the lease then simply expires
            log.warning("leader election: releasing %s/%s: %s", *self._where(), exc)

    def _where(self) -> tuple[str, str]:
        return self.config.namespace, self.config.name


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
