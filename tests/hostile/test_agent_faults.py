"""Faults inside the agent: a watcher that dies or meets a bug, a 300-container pod removed while it starts,
and file modes whatever the flags (issue 14 items 4, 7 and 12)."""

from __future__ import annotations

import os
import stat
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.kuberuntime.processes import HostLauncher, spawn
from harness.manifests import write_manifest
from kubenode.model import Pod, parse_pod
from tests.agent.support import Harness, pod_manifest, wait_until


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the injected death
def test_a_dead_watcher_thread_is_restarted(make_harness: Callable[..., Harness], manifests: Path) -> None:
    h = make_harness().start()
    watcher = h.source._watcher
    assert watcher is not None
    real_read = watcher.read
    calls = {"n": 0}

    def read_once_then_die(timeout: float | None) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise SystemExit("injected: the watcher thread ends")
        return real_read(timeout)

    watcher.read = read_once_then_die  # type: ignore[method-assign,assignment]
    watcher.wake()
    wait_until(lambda: h.source.restarts == 1, 5, "the supervisor to restart the watcher")
    write_manifest(manifests, "late.yaml", pod_manifest("late"))
    h.wait_phase("late", "Running")


def test_a_bug_in_one_manifest_costs_that_manifest_only(
    make_harness: Callable[..., Harness], manifests: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def parse(obj: Any, source: str = "") -> Pod:
        if obj["metadata"]["name"] == "cursed":
            raise RuntimeError("injected bug")
        return parse_pod(obj, source)

    monkeypatch.setattr("agent.config.sources.parse_pod", parse)
    write_manifest(manifests, "cursed.yaml", pod_manifest("cursed"))
    h = make_harness().start()  # the exception escaped the first scan
    write_manifest(
        manifests, "cursed2.yaml", pod_manifest("cursed").replace("{name: cursed}", "{name: cursed}\n")
    )
    write_manifest(manifests, "web.yaml", pod_manifest("web"))
    h.wait_phase("web", "Running")
    messages = {e["message"] for e in h.agent.status_json()["errors"]}
    assert messages == {"internal error: RuntimeError"}


def many_containers(name: str, count: int) -> str:
    containers = "".join(f"- {{name: c{i}, command: [sleep, '600']}}\n" for i in range(count))
    header = f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
        """
    return textwrap.dedent(header) + textwrap.indent(containers, "  ")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    counts = {"spawn": 0}

    def counting_spawn(*args: Any, **kwargs: Any) -> Any:
        counts["spawn"] += 1
        return spawn(*args, **kwargs)

    # The runtime starts processes through its launcher (agent/kuberuntime/processes.py HostLauncher).
    monkeypatch.setattr(HostLauncher, "spawn", staticmethod(counting_spawn))
    yield counts


def test_a_big_pod_is_written_per_sync_and_removal_preempts_its_start(
    make_harness: Callable[..., Harness], manifests: Path, counted: dict[str, int]
) -> None:
    containers = 300
    h = make_harness()
    saves = {"n": 0}
    real_save = h.agent.store.save

    def save(record: Any) -> None:
        saves["n"] += 1
        real_save(record)

    h.agent.store.save = save  # type: ignore[method-assign]
    h.start()
    write_manifest(manifests, "big.yaml", many_containers("big", containers))
    wait_until(lambda: counted["spawn"] >= 30, 30, "30 containers to start")
    saves_after_30 = saves["n"]
    (manifests / "big.yaml").unlink()
    wait_until(lambda: h.pod("big") is None, 30, "the big pod to terminate and be cleaned up")
    print(f"record writes by 30 starts: {saves_after_30}; containers started in all: {counted['spawn']}")
    assert saves_after_30 <= 3  # was one full rewrite per container start
    assert counted["spawn"] < containers  # the removal stopped the start


def test_state_dir_and_logs_stay_private_whatever_the_umask(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    old_umask = os.umask(0o000)
    try:
        write_manifest(manifests, "web.yaml", pod_manifest("web", command="echo hi; sleep 600"))
        h = make_harness(state).start()  # the harness runs without a device manager
        item = h.wait_phase("web", "Running")
    finally:
        os.umask(old_umask)
    log_path = Path(item["status"]["containerStatuses"][0]["logPath"])
    wait_until(log_path.exists, 5, "the container's log")
    assert stat.S_IMODE(state.stat().st_mode) & ~0o750 == 0, oct(state.stat().st_mode)
    assert stat.S_IMODE(log_path.stat().st_mode) & ~0o640 == 0, oct(log_path.stat().st_mode)
    for record in (state / "pods").iterdir():
        assert stat.S_IMODE(record.stat().st_mode) & ~0o640 == 0
