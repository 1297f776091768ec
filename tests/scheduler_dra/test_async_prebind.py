"""PreBind in the asynchronous binding cycle: with an AsyncBinder and a writer that writes without waiting,
the claim's status is written first and the Binding is sent from its answer, off the scheduling thread;
a conflicting status write sends no Binding, frees the device and sends the pod back to the queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubenode.dra.types import ResourceClaim, parse_device_class, parse_resource_claim, parse_resource_slice
from kubenode.kubeclient import Conflict
from kubenode.model.objects import Pod
from scheduler.clock import ManualClock
from scheduler.dra.plugin import WriteDone, written_claim
from scheduler.engine import Scheduler
from tests.scheduler.support import node
from tests.scheduler_dra import support
from tests.scheduler_dra.test_plugin import claim_pod


class LaterBinder:
    """An AsyncBinder whose answers the test gives."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Callable[[Exception | None], None]]] = []

    def bind(self, pod: Pod, node: str) -> None:
        raise AssertionError("the synchronous bind is not used with bind_async")

    def bind_async(self, pod: Pod, node: str, done: Callable[[Exception | None], None]) -> None:
        self.sent.append((pod.key, node, done))

    def evict(self, victim: Pod, preemptor: Pod, node: str) -> None:
        raise AssertionError("no preemption here")


class LaterClaims:
    """A claim writer whose answers the test gives."""

    def __init__(self) -> None:
        self.sent: list[tuple[ResourceClaim, dict[str, Any], WriteDone]] = []

    def write_status(self, claim: ResourceClaim, status: dict[str, Any]) -> ResourceClaim:
        raise AssertionError("the synchronous write is not used with write_status_async")

    def write_status_async(self, claim: ResourceClaim, status: dict[str, Any], done: WriteDone) -> None:
        self.sent.append((claim, status, done))

    def answer(self, index: int = 0) -> None:
        claim, status, done = self.sent.pop(index)
        meta = {**claim.raw["metadata"], "resourceVersion": "2"}
        done(written_claim(claim, status, {**claim.raw, "metadata": meta, "status": status}), None)


def cluster(devices: int = 1) -> tuple[Scheduler, LaterBinder, LaterClaims]:
    clock = ManualClock()
    binder = LaterBinder()
    scheduler = Scheduler(binder, None, clock=clock, wall_clock=clock.now, seed=0)
    claims = LaterClaims()
    scheduler.dra.writer = claims
    scheduler.add_node(node("node-0", {"cpu": 4000}))
    spec = {
        "name": "gpus",
        "node": "node-0",
        "pool": "node-0",
        "driver": "gpu.example.com",
        "devices": [f"gpu-{i}" for i in range(devices)],
    }
    scheduler.dra.put_slice(parse_resource_slice(support.slice_object(spec)))
    scheduler.dra.put_class(parse_device_class(support.class_object("gpu.example.com", "gpu.example.com")))
    for name in ("a", "b"):
        obj = support.claim_object({"name": name, "requests": [{"name": "gpu", "class": "gpu.example.com"}]})
        obj["metadata"]["resourceVersion"] = "1"
        scheduler.dra.put_claim(parse_resource_claim(obj))
    return scheduler, binder, claims


def test_the_claim_is_written_before_the_binding_is_sent_and_both_leave_the_scheduling_thread() -> None:
    scheduler, binder, claims = cluster()
    scheduler.add_pod(claim_pod("pa", "a"))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "node-0"
    # The cycle returned with the write in flight and no Binding yet: the next cycle may run.
    [(claim, status, _)] = claims.sent
    assert claim.key == "default/a" and status["reservedFor"][0]["name"] == "pa"
    assert status["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert binder.sent == []
    claims.answer()
    [(pod, bound_to, done)] = binder.sent
    assert (pod, bound_to) == ("default/pa", "node-0")
    assert scheduler.dra.state.claims["default/a"].allocation is not None  # committed as written
    done(None)
    scheduler.close(timeout=1)
    # The one device is taken: the second claim's pod does not fit.
    scheduler.add_pod(claim_pod("pb", "b"))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node is None and "cannot allocate all claims" in outcome.message


def test_a_conflicting_claim_write_sends_no_binding_and_the_device_is_free_again() -> None:
    scheduler, binder, claims = cluster()
    scheduler.add_pod(claim_pod("pa", "a"))
    scheduler.schedule_one()
    [(_, _, done)] = claims.sent
    stale = (
        'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "a": the object has been modified'
    )
    done(None, Conflict(409, "Conflict", stale, {}))
    assert binder.sent == []
    assert not scheduler.cache.is_assumed("default/pa")
    assert scheduler.dra.state.in_flight("default/pa") == []
    # The device went back: another pod's claim gets it.
    scheduler.add_pod(claim_pod("pb", "b"))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "node-0"
    scheduler.close(timeout=0)


def test_pods_in_flight_together_hold_their_own_devices_whatever_order_the_answers_come_in() -> None:
    scheduler, binder, claims = cluster(devices=2)
    scheduler.add_pod(claim_pod("pa", "a"))
    scheduler.add_pod(claim_pod("pb", "b"))
    scheduler.schedule_one()
    scheduler.schedule_one()
    devices = [status["allocation"]["devices"]["results"][0]["device"] for _, status, _ in claims.sent]
    assert sorted(devices) == ["gpu-0", "gpu-1"]  # the first in flight kept its device from the second
    claims.answer(1)
    claims.answer(0)
    assert sorted(pod for pod, _, _ in binder.sent) == ["default/pa", "default/pb"]
    for _, _, done in binder.sent:
        done(None)
    state = scheduler.dra.state
    assert state.in_flight("default/pa") == [] and state.in_flight("default/pb") == []
    assert all(state.claims[key].allocation is not None for key in ("default/a", "default/b"))
    scheduler.close(timeout=1)
