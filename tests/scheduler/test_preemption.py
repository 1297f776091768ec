"""Preemption: node and victim choice by kube-scheduler's rules, nomination, messages."""

from __future__ import annotations

from typing import Any

from kubenode.model.objects import Pod
from tests.scheduler.support import RecordingBinder, engine, node, pod

CPU4 = {"cpu": 4000}


def preempt(
    existing: list[tuple[str, int, int, str, str]], cpu: int = 2000, priority: int = 1000
) -> tuple[Any, ...]:
    """existing: (name, cpu, priority, node, start time). Returns (outcome, scheduler, clock, binder)."""
    scheduler, clock, binder = engine()
    for name in sorted({e[3] for e in existing}):
        scheduler.add_node(node(name, CPU4))
    for name, used, prio, on, started in existing:
        scheduler.add_pod(pod(name, {"cpu": used}, priority=prio, node_name=on, start_time=started))
    scheduler.add_pod(pod("vip", {"cpu": cpu}, priority=priority))
    return scheduler.schedule_one(), scheduler, clock, binder


T1, T2, T3 = "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"


def test_lowest_priority_victims_win_and_the_pod_lands_on_the_nominated_node() -> None:
    outcome, scheduler, clock, binder = preempt(
        [("mid-1", 2000, 500, "a", T1), ("mid-2", 2000, 500, "a", T1), ("low", 4000, 100, "b", T1)]
    )
    assert outcome.node is None and outcome.nominated_node == "b"
    assert [v.name for v in outcome.victims] == ["low"] and binder.evicted == ["default/low"]
    assert outcome.message == "0/2 nodes are available: 2 Insufficient cpu."
    clock.advance(1)  # the preemptor's backoff
    placed = scheduler.schedule_one()
    assert placed is not None and placed.node == "b"


def test_a_full_tie_goes_to_the_first_candidate_node() -> None:
    outcome, *_ = preempt(
        [
            ("a-1", 1000, 100, "a", T1),
            ("a-2", 1000, 100, "a", T1),
            ("a-3", 2000, 100, "a", T1),
            ("b-1", 4000, 100, "b", T1),
        ]
    )
    # a: all three removed, a-1 and a-2 reprieved -> victim a-3; b: victim b-1. Highest
    # priority, priority sum, count and start time all tie: the first node wins.
    assert outcome.nominated_node == "a" and [v.name for v in outcome.victims] == ["a-3"]


def test_reprieve_keeps_the_most_important_pods() -> None:
    outcome, *_ = preempt(
        [("old", 1000, 100, "a", T1), ("new", 1000, 100, "a", T3), ("higher", 1000, 200, "a", T2)],
        cpu=2000,
    )
    # Removing all frees 4 cpu. Reprieve order: higher (200), old (earlier start), then new,
    # which no longer leaves 2 cpu free.
    assert [v.name for v in outcome.victims] == ["new"]


def test_smaller_priority_sum_beats_more_victims_of_lower_priority() -> None:
    outcome, *_ = preempt(
        [
            ("x-1", 1000, 100, "a", T1),
            ("x-2", 1000, 100, "a", T1),
            ("x-3", 2000, 300, "a", T1),
            ("y", 2000, 100, "b", T1),
            ("y-keep", 2000, 300, "b", T1),
        ],
        cpu=2000,
    )
    # a: victims x-1, x-2 (highest 100, sum 2*(100+2^31)); b: victim y (highest 100, sum 100+2^31).
    assert outcome.nominated_node == "b" and [v.name for v in outcome.victims] == ["y"]


def test_latest_started_victims_are_preferred_on_a_tie() -> None:
    outcome, *_ = preempt([("early", 4000, 100, "a", T1), ("late", 4000, 100, "b", T3)], cpu=4000)
    assert outcome.nominated_node == "b"


def test_nomination_holds_the_freed_room_against_lower_priority_pods() -> None:
    outcome, scheduler, clock, _ = preempt([("low", 4000, 100, "a", T1)], cpu=4000)
    assert outcome.nominated_node == "a"
    scheduler.add_pod(pod("sneaky", {"cpu": 1000}, priority=50))
    sneaky = scheduler.schedule_one()
    assert sneaky is not None and sneaky.pod.name == "sneaky" and sneaky.node is None
    clock.advance(1)
    vip = scheduler.schedule_one()
    assert vip is not None and vip.pod.name == "vip" and vip.node == "a"


def test_no_victims_and_never_policy_messages() -> None:
    outcome, *_ = preempt([("peer", 4000, 1000, "a", T1)])
    assert outcome.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    scheduler, _, binder = engine()
    scheduler.add_node(node("a", CPU4))
    scheduler.add_pod(pod("low", {"cpu": 4000}, priority=1, node_name="a"))
    scheduler.add_pod(pod("polite", {"cpu": 1000}, priority=100, preemption_policy="Never"))
    polite = scheduler.schedule_one()
    assert polite is not None and binder.evicted == []
    assert polite.message == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
    )


def test_removing_every_lower_pod_is_not_enough() -> None:
    outcome, *_ = preempt([("low", 1000, 100, "a", T1), ("high", 3000, 5000, "a", T1)], cpu=2000)
    assert outcome.victims == ()
    assert outcome.message.endswith("preemption: 0/1 nodes are available: 1 Insufficient cpu.")


class RefusingEvictions(RecordingBinder):
    def evict(self, victim: Pod, preemptor: Pod, node: str) -> None:
        raise RuntimeError("apiserver said no")


def test_a_refused_eviction_fails_this_attempt_only_and_the_victim_stays_counted() -> None:
    scheduler, clock, _ = engine(RefusingEvictions())
    scheduler.add_node(node("a", CPU4))
    scheduler.add_pod(pod("low", {"cpu": 4000}, priority=100, node_name="a"))
    scheduler.add_pod(pod("vip", {"cpu": 2000}, priority=1000))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node is None and not outcome.victims
    assert outcome.message == "preemption: evicting default/low from a failed: apiserver said no"
    assert scheduler.cache.pods_on("a")[0].pod.name == "low"
    assert scheduler.queue.where("default/vip") == "backoff" and not scheduler.nominations
    clock.advance(1)
    again = scheduler.schedule_one()
    assert again is not None and again.pod.name == "vip"
