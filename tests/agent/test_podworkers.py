"""podWorkers with a recording syncer and an injected clock: coalescing, termination, grace, backoff."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest

from agent.podworkers.types import (
    SyncContext,
    SyncResult,
    UpdatePodOptions,
    UpdateType,
    WorkType,
    effective_grace_period,
)
from agent.podworkers.workers import PodWorkers
from kubenode.model import Container, Pod


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingSyncer:
    """Records every call; `gate` (when set up) blocks sync_pod until released."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []  # (kind, pod command, grace)
        self.entered = threading.Event()
        self.gate: threading.Event | None = None
        self.terminating_gate: threading.Event | None = None  # holds sync_terminating_pod until set
        self.fail_next = 0
        self.terminal = False
        self.requeue_after: float | None = None
        self.cancelled_seen: list[bool] = []

    def sync_pod(self, update_type: UpdateType, pod: Pod, ctx: SyncContext) -> SyncResult:
        self.calls.append(("sync", pod.containers[0].command[0], 0))
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(10)
            self.cancelled_seen.append(ctx.cancelled.is_set())
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("sync failed")
        return SyncResult(terminal=self.terminal, requeue_after=self.requeue_after)

    def sync_terminating_pod(self, pod: Pod, ctx: SyncContext) -> None:
        self.calls.append(("terminating", pod.containers[0].command[0], ctx.grace_period()))
        if self.terminating_gate is not None:
            self.terminating_gate.wait(10)

    def sync_terminated_pod(self, pod: Pod, ctx: SyncContext) -> None:
        self.calls.append(("terminated", pod.containers[0].command[0], 0))


def make_pod(command: str = "v1", uid: str = "uid-1", grace: int = 30) -> Pod:
    return Pod(
        name="p",
        uid=uid,
        termination_grace_period_seconds=grace,
        containers=(Container("c", command=(command,)),),
    )


@pytest.fixture
def setup() -> Iterator[tuple[PodWorkers, RecordingSyncer, FakeClock]]:
    clock = FakeClock()
    syncer = RecordingSyncer()
    workers = PodWorkers(syncer, clock=clock, rand=lambda: 0.0, resync_interval=60, backoff_period=10)
    yield workers, syncer, clock
    if syncer.gate is not None:
        syncer.gate.set()
    workers.stop()


def wait_idle(workers: PodWorkers, uid: str = "uid-1") -> None:
    assert workers.wait_idle(uid, 5), "worker did not go idle"


def test_updates_coalesce_to_the_latest(setup: tuple[PodWorkers, RecordingSyncer, FakeClock]) -> None:
    workers, syncer, _ = setup
    syncer.gate = threading.Event()
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("v1")))
    assert syncer.entered.wait(5)
    for version in ("v2", "v3", "v4"):
        workers.update_pod(UpdatePodOptions(UpdateType.UPDATE, make_pod(version)))
    syncer.gate.set()
    wait_idle(workers)
    assert syncer.calls == [("sync", "v1", 0), ("sync", "v4", 0)]


def test_kill_interrupts_and_terminates_in_order(
    setup: tuple[PodWorkers, RecordingSyncer, FakeClock],
) -> None:
    workers, syncer, _ = setup
    syncer.gate = threading.Event()
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("v1")))
    assert syncer.entered.wait(5)
    done = threading.Event()
    workers.update_pod(
        UpdatePodOptions(UpdateType.KILL, make_pod("v1"), grace_period_override=5, completed=done)
    )
    assert workers.work_type("uid-1") == WorkType.TERMINATING
    syncer.gate.set()
    assert done.wait(5)
    assert workers.wait_for(lambda: workers.is_finished("uid-1"), 5)
    assert syncer.cancelled_seen == [True], "the sync in flight saw its context cancelled"
    assert syncer.calls == [("sync", "v1", 0), ("terminating", "v1", 5), ("terminated", "v1", 0)]
    # A finished UID ignores further updates until purged.
    workers.update_pod(UpdatePodOptions(UpdateType.UPDATE, make_pod("v9")))
    assert workers.wait_idle("uid-1", 1)
    assert len(syncer.calls) == 3


def test_terminating_only_moves_forward_and_grace_only_shrinks(
    setup: tuple[PodWorkers, RecordingSyncer, FakeClock],
) -> None:
    workers, syncer, _ = setup
    syncer.gate = threading.Event()
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("v1")))
    assert syncer.entered.wait(5)
    workers.update_pod(UpdatePodOptions(UpdateType.KILL, make_pod("v1"), grace_period_override=20))
    assert workers.grace_period("uid-1") == 20
    workers.update_pod(UpdatePodOptions(UpdateType.KILL, make_pod("v1"), grace_period_override=25))
    assert workers.grace_period("uid-1") == 20, "a longer grace period must not extend termination"
    workers.update_pod(UpdatePodOptions(UpdateType.KILL, make_pod("v1"), grace_period_override=7))
    assert workers.grace_period("uid-1") == 7
    # An ordinary update (even a create) does not bring a terminating pod back to syncing.
    workers.update_pod(UpdatePodOptions(UpdateType.UPDATE, make_pod("v2")))
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("v3")))
    assert workers.work_type("uid-1") == WorkType.TERMINATING
    assert workers.grace_period("uid-1") == 7
    syncer.gate.set()
    assert workers.wait_for(lambda: workers.is_finished("uid-1"), 5)
    assert [c[0] for c in syncer.calls] == ["sync", "terminating", "terminated"]
    assert syncer.calls[1] == ("terminating", "v3", 7)
    # The create during termination asked for a restart: after purging, the same UID may start again.
    assert workers.sync_known_pods([make_pod("v3")]) == {}
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("v4")))
    wait_idle(workers)
    assert syncer.calls[-1] == ("sync", "v4", 0)


def test_effective_grace_period_rules() -> None:
    pod = make_pod(grace=30)
    assert effective_grace_period(0, pod, None) == (30, False)
    assert effective_grace_period(30, pod, 10) == (10, True)
    assert effective_grace_period(10, pod, 20) == (10, False)
    assert effective_grace_period(10, pod, 0) == (1, True)  # floor 1 s
    deleting = replace(pod, deletion_grace_period_seconds=4)
    assert effective_grace_period(10, deleting, None) == (4, True)


def test_failed_syncs_back_off_and_success_resyncs(
    setup: tuple[PodWorkers, RecordingSyncer, FakeClock],
) -> None:
    workers, syncer, clock = setup
    syncer.fail_next = 1
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("v1")))
    wait_idle(workers)
    assert workers.queue.due_at("uid-1") == clock.now + 10  # backOffPeriod (jitter 0)
    clock.now += 9.9
    assert workers.requeue_due() == []
    clock.now += 0.1
    assert workers.requeue_due() == ["uid-1"]
    wait_idle(workers)
    assert [c[0] for c in syncer.calls] == ["sync", "sync"]
    assert workers.queue.due_at("uid-1") == clock.now + 60  # resync interval after success
    # The syncer can ask to come back sooner (a crash-loop backoff expiring).
    syncer.requeue_after = 3.0
    clock.now += 60
    workers.requeue_due()
    wait_idle(workers)
    assert workers.queue.due_at("uid-1") == clock.now + 3.0


def test_terminal_pod_terminates_and_orphans_are_killed(
    setup: tuple[PodWorkers, RecordingSyncer, FakeClock],
) -> None:
    workers, syncer, _ = setup
    syncer.terminal = True
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("job", uid="uid-1", grace=3)))
    assert workers.wait_for(lambda: workers.is_finished("uid-1"), 5)
    assert syncer.calls == [("sync", "job", 0), ("terminating", "job", 3), ("terminated", "job", 0)]
    syncer.terminal = False
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("svc", uid="uid-2", grace=4)))
    wait_idle(workers, "uid-2")
    # uid-2 is no longer desired: SyncKnownPods starts its termination with the spec's grace.
    assert workers.sync_known_pods([make_pod("job", uid="uid-1")]) == {
        "uid-1": WorkType.TERMINATED,
        "uid-2": WorkType.TERMINATING,
    }
    assert workers.wait_for(lambda: workers.is_finished("uid-2"), 5)
    assert ("terminating", "svc", 4) in syncer.calls
    assert workers.sync_known_pods([]) == {}
    assert workers.known_uids() == []


def test_kill_of_a_terminated_pod_completes_at_once(
    setup: tuple[PodWorkers, RecordingSyncer, FakeClock],
) -> None:
    """As the kubelet's UpdatePod: a terminated (not yet finished) pod closes CompletedCh at once."""
    workers, syncer, _ = setup
    cleanup_may_finish = threading.Event()
    in_cleanup = threading.Event()

    def slow_terminated(pod: Pod, ctx: SyncContext) -> None:
        in_cleanup.set()
        cleanup_may_finish.wait(10)

    syncer.sync_terminated_pod = slow_terminated  # type: ignore[method-assign]  # hold the pod in terminated
    # First sighting of an already-failed pod: only the terminated cleanup runs.
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, replace(make_pod("job"), phase="Failed")))
    assert in_cleanup.wait(5)
    assert workers.work_type("uid-1") == WorkType.TERMINATED
    done = threading.Event()
    workers.update_pod(UpdatePodOptions(UpdateType.KILL, make_pod("job"), completed=done))
    assert done.is_set(), "a kill of a terminated pod must not wait for anything"
    cleanup_may_finish.set()
    assert workers.wait_for(lambda: workers.is_finished("uid-1"), 5)


def test_an_orphan_that_never_started_is_finished_without_a_sync(
    setup: tuple[PodWorkers, RecordingSyncer, FakeClock],
) -> None:
    workers, syncer, _ = setup
    done = threading.Event()
    # Holding the workers' lock keeps the new worker from taking its update before
    # sync_known_pods runs: the pod is known but not started.
    with workers._lock:
        workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("never")))
        workers.update_pod(UpdatePodOptions(UpdateType.KILL, make_pod("never"), completed=done))
        thread = workers._statuses["uid-1"].thread
        assert workers.sync_known_pods([]) == {}
    assert done.is_set(), "a kill waiting on the unstarted orphan must be released"
    assert thread is not None
    thread.join(5)
    assert not thread.is_alive(), "the unstarted worker must exit"
    assert syncer.calls == []
    assert workers.known_uids() == []
    assert workers.should_pod_content_be_removed("uid-1")
    # The same UID may come back later and then runs normally.
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("again")))
    wait_idle(workers)
    assert syncer.calls == [("sync", "again", 0)]


def test_orphans_count_as_deleted_unlike_pods_that_merely_finished(
    setup: tuple[PodWorkers, RecordingSyncer, FakeClock],
) -> None:
    workers, syncer, _ = setup
    assert not workers.should_pod_content_be_removed("uid-x"), "nothing is removed before the first sync"
    syncer.terminal = True
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("job", uid="uid-1")))
    assert workers.wait_for(lambda: workers.is_finished("uid-1"), 5)
    syncer.terminal = False
    workers.update_pod(UpdatePodOptions(UpdateType.CREATE, make_pod("svc", uid="uid-2")))
    wait_idle(workers, "uid-2")
    job, svc = make_pod("job", uid="uid-1"), make_pod("svc", uid="uid-2")
    assert workers.sync_known_pods([job, svc]) == {"uid-1": WorkType.TERMINATED, "uid-2": WorkType.SYNC}
    # uid-1 completed but is still wanted: its content stays.
    assert not workers.should_pod_content_be_removed("uid-1")
    syncer.terminating_gate = threading.Event()  # the orphan's termination waits until checked
    assert workers.sync_known_pods([job]) == {"uid-1": WorkType.TERMINATED, "uid-2": WorkType.TERMINATING}
    assert not workers.should_pod_content_be_removed("uid-2"), "still terminating"
    syncer.terminating_gate.set()
    assert workers.wait_for(lambda: workers.is_finished("uid-2"), 5)
    assert workers.should_pod_content_be_removed("uid-2")
    assert not workers.should_pod_content_be_removed("uid-1")


def test_an_already_terminal_pod_seen_first_is_cleaned_up_once(
    setup: tuple[PodWorkers, RecordingSyncer, FakeClock],
) -> None:
    """After an agent restart a Succeeded pod still bound to the node arrives as a CREATE: only its
    terminated cleanup runs, once. The first sighting's CREATE is no restart request (the kubelet's
    `!firstTime`): taken for one, housekeeping purged the worker and created it again every round, and
    the agent cleaned the pod up twice a second (found with Job pods under kube-apiserver 1.37,
    docs/interop.md)."""
    workers, syncer, _ = setup
    done = replace(make_pod("job"), phase="Succeeded")
    for _ in range(5):  # housekeeping rounds: sync_known_pods, then a CREATE for an admitted pod it lacks
        workers.sync_known_pods([done])
        if done.uid not in workers.known_uids():
            workers.update_pod(UpdatePodOptions(UpdateType.CREATE, done))
        wait_idle(workers)
    assert syncer.calls == [("terminated", "job", 0)]
