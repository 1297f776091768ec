"""The scheduling queue with an injected clock: order, backoff, parking and flushes."""

from __future__ import annotations

import dataclasses
from typing import Any

from scheduler.clock import ManualClock
from scheduler.queue import SchedulingQueue
from tests.scheduler.support import pod

KEY = "default/p"


def tried_once(
    moved_during_cycle: bool = False, rejected_by: str = "NodeResourcesFit"
) -> tuple[SchedulingQueue, ManualClock]:
    """A queue whose pod p has been tried once and found unschedulable."""
    clock = ManualClock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p", {"cpu": 8000}))
    qp = queue.pop()
    assert qp is not None
    if moved_during_cycle:
        queue.move_all(lambda q: True)  # e.g. a node was added while p was being scheduled
    queue.add_unschedulable(qp, frozenset({rejected_by}))
    return queue, clock


def test_active_queue_orders_by_priority_then_arrival() -> None:
    clock = ManualClock()
    queue = SchedulingQueue(clock)
    for name, priority in (("low", 0), ("high-1", 100), ("mid", 50), ("high-2", 100)):
        queue.add(pod(name, priority=priority))
        clock.advance(0.1)
    order = []
    while (qp := queue.pop()) is not None:
        order.append(qp.pod.name)
    assert order == ["high-1", "high-2", "mid", "low"]


def test_backoff_doubles_from_one_second_to_ten() -> None:
    queue = SchedulingQueue(ManualClock())
    assert [queue.backoff_duration(n) for n in range(1, 8)] == [1, 2, 4, 8, 10, 10, 10]


def test_backoff_stays_at_the_maximum_however_many_attempts() -> None:
    queue = SchedulingQueue(ManualClock())
    assert queue.backoff_duration(1025) == 10  # 2.0**1024 would overflow a float
    assert queue.backoff_duration(10**6) == 10


def test_failed_pod_waits_out_its_backoff_then_returns() -> None:
    clock = ManualClock()
    queue = SchedulingQueue(clock)
    queue.add(pod("p"))
    for attempt, wait in ((1, 1.0), (2, 2.0), (3, 4.0)):
        qp = queue.pop()
        assert qp is not None and qp.attempts == attempt
        queue.add_error(qp)
        assert queue.where(KEY) == "backoff"
        assert queue.next_backoff_expiry() == clock.now() + wait
        clock.advance(wait - 0.001)
        queue.flush_backoff_completed()
        assert queue.pop() is None
        clock.advance(0.001)
        queue.flush_backoff_completed()
        assert queue.where(KEY) == "active"


def test_unschedulable_pod_is_parked_until_a_relevant_event() -> None:
    queue, clock = tried_once()
    assert queue.where(KEY) == "unschedulable"
    assert queue.move_all(lambda q: False) == 0
    assert queue.where(KEY) == "unschedulable"
    clock.advance(0.5)  # still backing off (1 s): a relevant event sends it to backoffQ
    assert queue.move_all(lambda q: "NodeResourcesFit" in q.rejected_by) == 1
    assert queue.where(KEY) == "backoff"
    clock.advance(0.5)
    queue.flush_backoff_completed()
    assert queue.where(KEY) == "active"


def test_event_after_backoff_moves_straight_to_active() -> None:
    queue, clock = tried_once()
    clock.advance(5)
    queue.move_all(lambda q: True)
    assert queue.where(KEY) == "active"


def test_event_during_the_cycle_sends_the_failed_pod_to_backoff() -> None:
    queue, _ = tried_once(moved_during_cycle=True)
    assert queue.where(KEY) == "backoff"


def test_unschedulable_pods_are_flushed_after_five_minutes() -> None:
    queue, clock = tried_once()
    clock.advance(300)
    queue.flush_unschedulable_leftover()
    assert queue.where(KEY) == "unschedulable"
    clock.advance(0.01)
    queue.flush_unschedulable_leftover()
    assert queue.where(KEY) == "active"


def test_spec_update_retries_an_unschedulable_pod_and_delete_removes_it() -> None:
    queue, clock = tried_once()
    clock.advance(2)
    queue.update(pod("p", {"cpu": 1000}))
    assert queue.where(KEY) == "active"
    queue.delete(KEY)
    assert queue.where(KEY) is None and len(queue) == 0


def test_status_only_update_leaves_an_unschedulable_pod_parked() -> None:
    queue, clock = tried_once()
    clock.advance(2)
    parked = pod("p", {"cpu": 8000})
    for status_change in (
        dataclasses.replace(parked, nominated_node_name="n1"),
        dataclasses.replace(parked, phase="Pending", start_time="2024-01-01T00:00:00Z"),
        dataclasses.replace(parked, source="api", raw={"metadata": {"resourceVersion": "7"}}),
    ):
        assert queue.update(status_change)
        assert queue.where(KEY) == "unschedulable", status_change
        qp = queue.get(KEY)
        assert qp is not None and qp.pod is status_change  # the newest object is still kept


def test_label_or_annotation_update_retries_an_unschedulable_pod() -> None:
    changes: list[dict[str, Any]] = [{"labels": {"tier": "web"}}, {"annotations": {"note": "x"}}]
    for change in changes:
        queue, clock = tried_once()
        clock.advance(2)
        assert queue.update(dataclasses.replace(pod("p", {"cpu": 8000}), **change))
        assert queue.where(KEY) == "active", change
