"""Leader election logic against an in-memory Lease store with compare-and-swap, and a manual clock."""

from __future__ import annotations

import copy
import dataclasses
import re
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from kubenode.kubeclient.leaderelection import ElectionConfig, LeaderElector, LeaseConflict

MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class MemoryLeases:
    """A Lease store with resourceVersion preconditions, like the API server's."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise ConnectionError("API server down")

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._check()
        lease = self.leases.get(f"{namespace}/{name}")
        return copy.deepcopy(lease) if lease else None

    def create(self, namespace: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        self._check()
        key = f"{namespace}/{lease['metadata']['name']}"
        if key in self.leases:
            raise LeaseConflict("exists")
        return self._store(key, lease)

    def update(self, namespace: str, name: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        self._check()
        key = f"{namespace}/{name}"
        if self.leases[key]["metadata"]["resourceVersion"] != lease["metadata"].get("resourceVersion"):
            raise LeaseConflict("stale resourceVersion")
        return self._store(key, lease)

    def _store(self, key: str, lease: Mapping[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(dict(lease))
        stored["metadata"] = {**stored["metadata"], "resourceVersion": str(self.version)}
        self.leases[key] = stored
        return copy.deepcopy(stored)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


CONFIG = ElectionConfig(name="sched", namespace="kube-system")


def elector(store: MemoryLeases, identity: str, clock: Clock) -> LeaderElector:
    return LeaderElector(store, dataclasses.replace(CONFIG, identity=identity), clock=clock)


def test_first_try_creates_the_lease_with_kube_defaults_and_micro_times() -> None:
    store, clock = MemoryLeases(), Clock()
    a = elector(store, "host-a_1", clock)
    assert a.try_acquire_or_renew()
    spec = store.leases["kube-system/sched"]["spec"]
    assert spec["holderIdentity"] == "host-a_1"
    assert spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0
    assert MICRO.match(spec["renewTime"]) and MICRO.match(spec["acquireTime"])


def test_a_follower_times_expiry_from_its_own_observation() -> None:
    store, clock = MemoryLeases(), Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b first sees the lease now
    # The holder's renewTime could say anything: b only counts its own seconds since the change.
    store.leases["kube-system/sched"]["spec"]["renewTime"] = "1970-01-01T00:00:00.000000Z"
    clock.now += 1
    assert not b.try_acquire_or_renew()  # the record changed: b's observation restarts
    clock.now += 14.9
    assert not b.try_acquire_or_renew()
    clock.now += 0.2
    assert b.try_acquire_or_renew()
    spec = store.leases["kube-system/sched"]["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


def test_renewing_keeps_acquire_time_and_transitions() -> None:
    store, clock = MemoryLeases(), Clock()
    a = elector(store, "a", clock)
    assert a.try_acquire_or_renew()
    first = dict(store.leases["kube-system/sched"]["spec"])
    clock.now += 2
    assert a.try_acquire_or_renew()
    spec = store.leases["kube-system/sched"]["spec"]
    assert spec["acquireTime"] == first["acquireTime"] and spec["leaseTransitions"] == 0


def test_of_two_racing_writers_the_stale_one_gets_409_and_loses() -> None:
    store, clock = MemoryLeases(), Clock()
    a, b, c = elector(store, "a", clock), elector(store, "b", clock), elector(store, "c", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()
    clock.now += 16  # a stopped renewing: both see it expired
    stale = store.get("kube-system", "sched")
    assert b.try_acquire_or_renew()
    # c read the lease before b's write: its PUT carries the old resourceVersion.
    original_get = store.get
    store.get = lambda namespace, name: copy.deepcopy(stale)  # type: ignore[method-assign]
    assert not c.try_acquire_or_renew()
    store.get = original_get  # type: ignore[method-assign]
    assert store.leases["kube-system/sched"]["spec"]["holderIdentity"] == "b"


def test_a_leader_that_cannot_renew_within_the_deadline_stops() -> None:
    store = MemoryLeases()
    fast = ElectionConfig(name="sched", identity="a", lease_duration=3, renew_deadline=2, retry_period=1)
    stopped = threading.Event()
    a = LeaderElector(store, fast, on_stopped_leading=stopped.set)
    stop = threading.Event()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(a.run(stop)))
    thread.start()
    try:
        assert _wait_for(a.is_leader, 5)
        store.down = True
        assert stopped.wait(6), "the leader kept leading without renewing"
        assert not a.is_leader()
    finally:
        stop.set()
        thread.join(5)
    assert result == [False]


def test_a_clean_stop_releases_the_lease() -> None:
    store = MemoryLeases()
    fast = ElectionConfig(name="sched", identity="a", lease_duration=3, renew_deadline=2, retry_period=1)
    a = LeaderElector(store, fast)
    stop = threading.Event()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(a.run(stop)))
    thread.start()
    assert _wait_for(a.is_leader, 5)
    stop.set()
    thread.join(5)
    assert result == [True]
    assert store.leases["kube-system/sched"]["spec"]["holderIdentity"] == ""


@pytest.mark.parametrize(
    ("duration", "deadline", "retry", "problem"),
    [
        (10, 10, 2, "leaseDuration must be greater than renewDeadline"),
        (15, 2, 2, "renewDeadline must be greater than retryPeriod*1.2"),
    ],
)
def test_bad_timings_are_refused(duration: float, deadline: float, retry: float, problem: str) -> None:
    config = ElectionConfig(name="x", lease_duration=duration, renew_deadline=deadline, retry_period=retry)
    assert config.problem() == problem
    with pytest.raises(ValueError, match=re.escape(problem)):
        LeaderElector(MemoryLeases(), config)


def _wait_for(condition: Any, timeout: float) -> bool:
    event = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if condition():
            return True
        event.wait(0.02)
    return bool(condition())
