"""The Evented PLEG (agent/kuberuntime/pleg/evented.py): a runtime that streams its container events has a
stopped container's pod synced at once, with no relist; a stream that breaks is relisted and reopened; after
five failures the agent is back on the generic relist at its own period. The runtime here is a hollow node's
(HollowLauncher: pretend processes that stream their starts and stops; HollowCgroups: no cgroups), so these
tests need neither root nor processes."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.composition import compose_node
from agent.config.sources import ManifestSource
from agent.hollow.standins import HollowCgroups, HollowLauncher, Ledger
from agent.kuberuntime.pleg import (
    CONTAINER_STOPPED,
    EVENTED_RELIST_PERIOD_S,
    ContainerEvent,
    ContainerEventHub,
    EventedPLEG,
    EventStreamError,
)
from agent.kuberuntime.pleg.evented import MAX_STREAM_RETRIES, ContainerEventStream
from agent.lifecycle.admission import host_allocatable
from harness.manifests import fast_agent_config
from tests.agent.support import pod_manifest, wait_until

STOP = ContainerEvent("uid-1", "main", CONTAINER_STOPPED)


class Recorder:
    """What the PLEG handed on: events, forced relists, the fallback."""

    def __init__(self) -> None:
        self.events: list[ContainerEvent] = []
        self.relists = 0
        self.fell_back = threading.Event()

    def relist(self) -> None:
        self.relists += 1


@pytest.fixture
def hub_pleg() -> Iterator[tuple[ContainerEventHub, EventedPLEG, Recorder]]:
    hub, seen = ContainerEventHub(), Recorder()
    pleg = EventedPLEG(hub.open, seen.events.append, seen.relist, seen.fell_back.set)
    pleg.start()
    yield hub, pleg, seen
    pleg.stop()


def test_a_stream_breaks_when_its_reader_falls_behind() -> None:
    stream = ContainerEventStream(capacity=2)
    stream.offer(STOP)
    assert stream.next(0) == STOP
    for _ in range(3):
        stream.offer(STOP)
    with pytest.raises(EventStreamError, match="2 events unread"):
        stream.next(0)


def test_events_reach_the_agent_without_a_relist(
    hub_pleg: tuple[ContainerEventHub, EventedPLEG, Recorder],
) -> None:
    hub, pleg, seen = hub_pleg
    hub.publish(STOP)
    wait_until(lambda: seen.events == [STOP], 10, "the stop event")
    assert seen.relists == 0 and pleg.in_use


def test_a_broken_stream_is_relisted_and_reopened(
    hub_pleg: tuple[ContainerEventHub, EventedPLEG, Recorder],
) -> None:
    hub, pleg, seen = hub_pleg
    hub.break_streams("runtime restarted")
    wait_until(lambda: seen.relists == 1, 10, "the forced relist")

    # The new stream may open after a publish; publish until one arrives through it.
    def delivered() -> bool:
        hub.publish(STOP)
        return bool(seen.events)

    wait_until(delivered, 10, "an event through the reopened stream")
    assert pleg.in_use and pleg.failures == 1 and not seen.fell_back.is_set()


def test_the_pleg_falls_back_after_five_failures(
    hub_pleg: tuple[ContainerEventHub, EventedPLEG, Recorder],
) -> None:
    hub, pleg, seen = hub_pleg
    for failures in range(1, MAX_STREAM_RETRIES + 1):
        hub.break_streams("gone")
        wait_until(lambda n=failures: seen.relists == n, 10, f"relist {failures}")  # type: ignore[misc]
    assert seen.fell_back.wait(10)
    assert not pleg.in_use and pleg.failures == MAX_STREAM_RETRIES


def test_a_stream_that_cannot_be_opened_counts_as_a_failure() -> None:
    seen = Recorder()

    def refuse() -> ContainerEventStream:
        raise EventStreamError("no GetContainerEvents")

    pleg = EventedPLEG(refuse, seen.events.append, seen.relist, seen.fell_back.set)
    pleg.start()
    try:
        assert seen.fell_back.wait(10)
        assert seen.relists == MAX_STREAM_RETRIES and not pleg.in_use
    finally:
        pleg.stop()


class HollowAgent:
    """A NodeAgent on a manifest dir over a hollow node's runtime (the launcher streams its events)."""

    def __init__(self, manifests: Path, state_dir: Path) -> None:
        self.config = fast_agent_config("/unused", manifests, state_dir)  # relist_interval 0.1 s
        self.launcher = HollowLauncher("testnode", Ledger(None), lambda: 0.0)
        self.agent = compose_node(
            self.config,
            HollowCgroups(),
            [ManifestSource(manifests, "testnode", rescan_interval=1.0)],
            allocatable=host_allocatable(self.config.max_pods),
            launcher=self.launcher,
        )
        self.relists = 0
        relist = self.agent.relist

        def counted() -> None:
            self.relists += 1
            relist()

        self.agent.relist = counted  # type: ignore[method-assign]

    def running_pid(self, name: str) -> int:
        def pid() -> int | None:
            for view in self.agent.views.pods():
                if view.record.name == name and view.record.phase == "Running":
                    return view.record.containers["main"].pid
            return None

        found: int = wait_until(pid, 10, f"{name} Running")
        return found

    def wait_stopped(self, name: str) -> None:
        def stopped() -> bool:
            views = [v for v in self.agent.views.pods() if v.record.name == name]
            return bool(views) and views[0].record.containers["main"].exit_code == 128 + signal.SIGTERM

        wait_until(stopped, 10, f"{name}'s stop recorded")


@pytest.fixture
def hollow(manifests: Path, tmp_path: Path) -> Iterator[HollowAgent]:
    node = HollowAgent(manifests, tmp_path / "state")
    node.agent.start()
    yield node
    node.agent.stop(terminate_pods=True, timeout=20)


def test_a_stopped_container_is_seen_without_a_relist(manifests: Path, hollow: HollowAgent) -> None:
    (manifests / "a.yaml").write_text(pod_manifest("a", restart_policy="Never"))
    pid = hollow.running_pid("a")
    assert hollow.agent.pleg is not None and hollow.agent.pleg.in_use
    assert hollow.agent.relist_period() == EVENTED_RELIST_PERIOD_S
    relists = hollow.relists
    hollow.launcher.signal(pid, signal.SIGTERM)  # the pretend container ends, as if it exited
    hollow.wait_stopped("a")
    wait_until(lambda: any(v.record.phase == "Failed" for v in hollow.agent.views.pods()), 10, "a Failed")
    assert hollow.relists == relists  # the event did it, not a relist


def test_the_agent_relists_at_its_own_period_once_the_stream_failed(
    manifests: Path, hollow: HollowAgent
) -> None:
    pleg = hollow.agent.pleg
    assert pleg is not None
    for failures in range(1, MAX_STREAM_RETRIES + 1):
        hollow.launcher.events.break_streams("gone")
        wait_until(lambda n=failures: pleg.failures == n, 10, f"failure {failures}")  # type: ignore[misc]
    wait_until(lambda: not pleg.in_use, 10, "the fallback")
    assert hollow.agent.relist_period() == hollow.config.relist_interval
    (manifests / "b.yaml").write_text(pod_manifest("b", restart_policy="Never"))
    pid = hollow.running_pid("b")
    relists = hollow.relists
    hollow.launcher.signal(pid, signal.SIGTERM)  # no stream any more: only a relist can see this
    hollow.wait_stopped("b")
    assert hollow.relists > relists
