"""The engine end to end with an in-memory binder: placements, messages, assume/forget, events."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kubenode.model.objects import Taint, Toleration
from scheduler.cache import CacheError
from scheduler.engine import NO_NODES
from tests.scheduler.support import GIB, GPU, RecordingBinder, engine, node, pod

GPU_TAINT = Taint("kubenode.io/gpu", "NoSchedule", "true")


def test_failure_message_matches_kube_scheduler_format() -> None:
    scheduler, _, _ = engine()
    scheduler.add_node(node("a", {"cpu": 4000}))
    scheduler.add_node(node("b", {"cpu": 4000, GPU: 1}))
    scheduler.add_node(node("c", {"cpu": 4000, GPU: 4}, taints=(GPU_TAINT,)))
    scheduler.add_pod(pod("user", {GPU: 1}, node_name="b"))
    scheduler.add_pod(pod("train", {GPU: 1}))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node is None
    # kube sorts the "count reason" strings as strings, so "1 node(s)..." comes first.
    assert outcome.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient kubenode.io/gpu. "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )


def test_every_insufficient_resource_and_too_many_pods_are_counted() -> None:
    scheduler, _, _ = engine()
    scheduler.add_node(node("a", {"cpu": 1000, "memory": GIB, "pods": 1}))
    scheduler.add_node(node("b", {"cpu": 1000, "memory": GIB}))
    scheduler.add_pod(pod("x", {}, node_name="a"))
    scheduler.add_pod(pod("big", {"cpu": 2000, "memory": 2 * GIB, "example.com/fpga": 1}))
    outcome = scheduler.schedule_one()
    assert outcome is not None
    assert outcome.message.startswith(
        "0/2 nodes are available: 1 Too many pods, 2 Insufficient cpu, 2 Insufficient example.com/fpga, "
        "2 Insufficient memory. preemption: "
    )


def test_no_nodes_message() -> None:
    scheduler, _, _ = engine()
    scheduler.add_pod(pod("p"))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.message == NO_NODES


def test_assumed_pod_is_counted_before_binding_completes() -> None:
    deferred: list[Callable[[], None]] = []
    scheduler, _, binder = engine()
    scheduler._run_binding = deferred.append  # hold the bind
    scheduler.add_node(node("a", {GPU: 1, "cpu": 4000}))
    scheduler.add_pod(pod("first", {GPU: 1}))
    scheduler.add_pod(pod("second", {GPU: 1}))
    first = scheduler.schedule_one()
    second = scheduler.schedule_one()
    assert first is not None and first.node == "a"
    assert second is not None and second.node is None and "1 Insufficient kubenode.io/gpu" in second.message
    assert scheduler.cache.is_assumed("default/first") and binder.bound == []
    deferred[0]()
    assert binder.bound == [("default/first", "a")]
    scheduler.add_pod(pod("first", {GPU: 1}, node_name="a"))  # the watch confirms it
    assert not scheduler.cache.is_assumed("default/first")


def test_failed_binding_forgets_the_pod_and_retries_after_backoff() -> None:
    binder = RecordingBinder(fail=True)
    scheduler, clock, _ = engine(binder)
    scheduler.add_node(node("a", {GPU: 1}))
    scheduler.add_pod(pod("p", {GPU: 1}))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "a"
    assert "default/p" not in scheduler.cache.pods
    assert int(scheduler.cache.table.requested[scheduler.cache.table.row[GPU], 0]) == 0
    assert scheduler.queue.where("default/p") == "backoff"
    binder.fail = False
    assert scheduler.schedule_one() is None
    clock.advance(1)
    retry = scheduler.schedule_one()
    assert retry is not None and retry.node == "a" and binder.bound == [("default/p", "a")]


def test_forget_checks_the_node() -> None:
    scheduler, _, _ = engine()
    scheduler.cache.assume(pod("p", node_name="a"), "a")
    with pytest.raises(CacheError, match="assumed on node 'a'"):
        scheduler.cache.forget("default/p", "b")
    with pytest.raises(CacheError, match="already in the cache"):
        scheduler.cache.assume(pod("p", node_name="a"), "a")
    scheduler.cache.forget("default/p", "a")
    assert not scheduler.cache.pods


def test_node_added_wakes_only_pods_that_fit_it() -> None:
    scheduler, clock, _ = engine()
    scheduler.add_node(node("small", {"cpu": 1000}))
    scheduler.add_pod(pod("needs-gpu", {GPU: 2}))
    scheduler.add_pod(pod("needs-cpu", {"cpu": 3000}))
    assert scheduler.schedule_one() is not None and scheduler.schedule_one() is not None
    clock.advance(20)
    scheduler.add_node(node("big-cpu", {"cpu": 8000}))
    assert scheduler.queue.where("default/needs-cpu") == "active"
    assert scheduler.queue.where("default/needs-gpu") == "unschedulable"
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "big-cpu"
    # Growing a node's GPUs helps the other one.
    scheduler.update_node(node("small", {"cpu": 1000, GPU: 2}))
    assert scheduler.queue.where("default/needs-gpu") == "active"


def test_first_node_retries_a_pod_that_found_no_nodes_even_if_it_does_not_fit() -> None:
    scheduler, clock, _ = engine()
    scheduler.add_pod(pod("needs-gpu", {GPU: 1}))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.message == NO_NODES
    clock.advance(20)
    scheduler.add_node(node("cpu-only", {"cpu": 1000}))
    assert scheduler.queue.where("default/needs-gpu") == "active"
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.message.startswith(
        "0/1 nodes are available: 1 Insufficient kubenode.io/gpu."
    )


def test_deleted_assigned_pod_wakes_pods_rejected_for_resources() -> None:
    scheduler, clock, _ = engine()
    scheduler.add_node(node("a", {GPU: 1}))
    scheduler.add_pod(pod("holder", {GPU: 1}, node_name="a"))
    scheduler.add_pod(pod("waiter", {GPU: 1}))
    assert scheduler.schedule_one() is not None
    clock.advance(20)
    assert scheduler.queue.where("default/waiter") == "unschedulable"
    scheduler.remove_pod(pod("holder", node_name="a"))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "a"


def test_ties_are_broken_at_random_but_reproducibly() -> None:
    def placements(seed: int) -> list[str | None]:
        scheduler, _, _ = engine(seed=seed)
        for i in range(8):
            scheduler.add_node(node(f"n{i}", {"cpu": 64000, "memory": 64 * GIB}))
        for i in range(8):
            scheduler.add_pod(pod(f"p{i}", {"cpu": 1000}))
        return [o.node for o in iter(scheduler.schedule_one, None)]

    assert placements(1) == placements(1)
    assert len({tuple(placements(s)) for s in range(5)}) > 1


def test_tolerations_and_selectors_steer_pods() -> None:
    scheduler, _, _ = engine()
    scheduler.add_node(node("gpu", {"cpu": 4000, GPU: 4}, taints=(GPU_TAINT,)))
    scheduler.add_node(node("cpu", {"cpu": 4000}, labels={"pool": "cpu"}))
    tolerant = pod("t", {GPU: 1}, tolerations=(Toleration("kubenode.io/gpu", "Exists"),))
    scheduler.add_pod(tolerant)
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "gpu"


def test_run_loop_binds_on_a_background_thread_and_stops() -> None:
    import threading
    import time

    from scheduler.engine import Scheduler

    binder = RecordingBinder()
    scheduler = Scheduler(binder, seed=0)  # real clock, real binding threads
    stop = threading.Event()
    loop = threading.Thread(target=scheduler.run, args=(stop,))
    loop.start()
    try:
        scheduler.add_node(node("a", {"cpu": 4000}))
        scheduler.add_pod(pod("p", {"cpu": 1000}))
        deadline = time.monotonic() + 10
        while not binder.bound and time.monotonic() < deadline:
            with scheduler.wakeup:
                scheduler.wakeup.wait(0.05)
        assert binder.bound == [("default/p", "a")]
    finally:
        stop.set()
        with scheduler.wakeup:
            scheduler.wakeup.notify_all()
        loop.join(5)
        scheduler.close()
    assert not loop.is_alive()
