"""Crash-loop backoff and restart policies of the process runtime, on an injected clock (no cgroups)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.container.downwardapi import HostInfo
from agent.container.podrecord import RUNNING, WAITING, PodRecord, RecordStore
from agent.kuberuntime.runtime import ProcessRuntime
from agent.util.backoff import CrashLoopBackoff
from kubenode.model import Container, Pod
from tests.agent.support import wait_until


class FakeClock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def make(tmp_path: Path, command: str, policy: str) -> tuple[ProcessRuntime, Pod, PodRecord, FakeClock]:
    clock = FakeClock()
    runtime = ProcessRuntime(tmp_path, RecordStore(tmp_path), HostInfo("n"), clock=clock)
    pod = Pod(
        name="p", uid="u1", restart_policy=policy, containers=(Container("c", command=("sh", "-c", command)),)
    )
    return runtime, pod, PodRecord("u1", "default", "p"), clock


def sync_after_exit(runtime: ProcessRuntime, pod: Pod, record: PodRecord) -> float | None:
    """Wait for the running process to exit, then sync once; returns the requeue hint."""
    wait_until(
        lambda: runtime.has_exited("u1") or record.containers["c"].state != RUNNING, 5, "the process to exit"
    )
    return runtime.sync_containers(pod, record, [], {})


def test_backoff_doubles_to_the_cap_and_resets() -> None:
    clock = FakeClock()
    backoff = CrashLoopBackoff(clock)
    assert backoff.remaining("k", clock.now) == 0  # the first restart is immediate
    backoff.restarted("k", clock.now)
    delays = []
    for _ in range(7):
        finished = clock.now
        delays.append(backoff.remaining("k", finished))
        clock.now += delays[-1]
        assert backoff.remaining("k", finished) == 0
        backoff.restarted("k", finished)
    assert delays == [10, 20, 40, 80, 160, 300, 300]
    # A container that ran fine for more than 10 minutes starts over at 10 s.
    clock.now += 601
    backoff.restarted("k", clock.now)
    assert backoff.current("k") == 10


def test_always_restarts_with_crash_loop_backoff(tmp_path: Path) -> None:
    runtime, pod, record, clock = make(tmp_path, "exit 3", "Always")
    assert runtime.sync_containers(pod, record, [], {}) is None
    c = record.containers["c"]
    assert c.state == RUNNING
    # First exit: restarted at once.
    assert sync_after_exit(runtime, pod, record) is None
    assert (c.state, c.restart_count, c.last_exit_code) == (RUNNING, 1, 3)
    # Second exit: 10 s of CrashLoopBackOff, and the runtime asks to be synced when it ends.
    assert sync_after_exit(runtime, pod, record) == pytest.approx(10)
    assert (c.state, c.reason, c.restart_count) == (WAITING, "CrashLoopBackOff", 1)
    assert record.phase == "Running"  # restarting containers keep the pod Running
    clock.now += 9
    assert runtime.sync_containers(pod, record, [], {}) == pytest.approx(1)
    clock.now += 1
    runtime.sync_containers(pod, record, [], {})
    assert (c.state, c.restart_count) == (RUNNING, 2)
    assert sync_after_exit(runtime, pod, record) == pytest.approx(20)
    logs = sorted(p.name for p in runtime.log_path(pod, "c", 0).parent.iterdir())
    assert logs == ["0.log", "1.log", "2.log"]  # one log file per restart, as the kubelet names them


@pytest.mark.parametrize(
    ("policy", "command", "phase", "restarts"),
    [
        ("Never", "exit 3", "Failed", 0),
        ("Never", "exit 0", "Succeeded", 0),
        ("OnFailure", "exit 0", "Succeeded", 0),
        ("OnFailure", "exit 2", "Running", 1),
    ],
)
def test_restart_policies(tmp_path: Path, policy: str, command: str, phase: str, restarts: int) -> None:
    runtime, pod, record, _ = make(tmp_path, command, policy)
    runtime.sync_containers(pod, record, [], {})
    sync_after_exit(runtime, pod, record)
    assert record.phase == phase
    assert record.containers["c"].restart_count == restarts
    runtime.kill_pod("u1", record, NoCgroup(), lambda: 1)


def test_a_missing_binary_is_a_start_error(tmp_path: Path) -> None:
    clock = FakeClock()
    runtime = ProcessRuntime(tmp_path, RecordStore(tmp_path), HostInfo("n"), clock=clock)
    pod = Pod(
        name="p", uid="u1", restart_policy="Never", containers=(Container("c", command=("/nonexistent",)),)
    )
    record = PodRecord("u1", "default", "p")
    runtime.sync_containers(pod, record, [], {})
    c = record.containers["c"]
    assert (c.state, c.reason, c.exit_code) == ("terminated", "StartError", 128)
    assert "/nonexistent" in c.message
    assert record.phase == "Failed"


class NoCgroup:
    def pids(self, uid: str) -> set[int]:
        return set()

    def signal_all(self, uid: str, sig: int) -> int:
        return 0


def test_pre_start_runs_before_every_start_and_its_failure_holds_the_container(tmp_path: Path) -> None:
    from agent.container.downwardapi import ContainerConfigError

    calls: list[tuple[str, str]] = []
    refuse = {"now": True}

    def pre_start(uid: str, container: str) -> None:
        calls.append((uid, container))
        if refuse["now"]:
            raise ContainerConfigError("PreStartContainer for example.com/dev failed: not ready")

    runtime = ProcessRuntime(
        tmp_path, RecordStore(tmp_path), HostInfo("n"), clock=FakeClock(), pre_start=pre_start
    )
    pod = Pod(name="p", uid="u1", containers=(Container("c", command=("sleep", "30")),))
    record = PodRecord("u1", "default", "p")
    hint = runtime.sync_containers(pod, record, [], {})
    rec = record.containers["c"]
    assert (rec.state, rec.reason) == (WAITING, "CreateContainerConfigError")
    assert "not ready" in rec.message and hint is not None
    refuse["now"] = False
    runtime.sync_containers(pod, record, [], {})
    assert rec.state == RUNNING and calls == [("u1", "c"), ("u1", "c")]
    runtime.kill_pod("u1", record, _PidsOf(rec.pid), lambda: 1)


class _PidsOf:
    """Just enough of the cgroup layer for kill_pod: the one process this test started."""

    def __init__(self, pid: int | None) -> None:
        self._pid = pid

    def pids(self, uid: str) -> set[int]:
        import psutil

        return {self._pid} if self._pid and psutil.pid_exists(self._pid) else set()

    def signal_all(self, uid: str, sig: int) -> int:
        import os

        if self._pid is None:
            return 0
        try:
            os.kill(self._pid, sig)
        except ProcessLookupError:
            return 0
        return 1


def test_an_exited_process_is_not_running_even_before_the_next_relist(tmp_path: Path) -> None:
    """The PLEG's poll reaps an exited process; its pid may be reused, so it must not be signalled."""
    runtime, pod, record, _ = make(tmp_path, "exit 3", "Never")
    runtime.sync_containers(pod, record, [], {})
    pid = record.containers["c"].pid
    wait_until(lambda: runtime.has_exited("u1"), 5, "the process to exit")  # reaped by now
    assert record.containers["c"].state == RUNNING, "no relist yet"
    assert pid not in runtime.running_pids("u1")
