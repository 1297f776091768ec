"""The session's host check (tests/leakcheck.py) on directories standing in for the host's CDI dirs and
cgroup hierarchies, with real processes: what it blames on this run, and what it leaves to another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deviceplugin.support import wait_until
from tests.leakcheck import Attribution, HostState, Watcher, leaks

REPO = Path(__file__).resolve().parents[1]


def fake_host(tmp_path: Path) -> tuple[list[Path], Path]:
    cdi = [tmp_path / "etc-cdi", tmp_path / "run-cdi"]
    cgroups = tmp_path / "cgroup"
    for hierarchy in ("cpu", "memory"):
        (cgroups / hierarchy).mkdir(parents=True)
        (cgroups / hierarchy / "cgroup.procs").write_text("")
    cdi[0].mkdir()
    return cdi, cgroups


def test_new_cdi_entries_and_kubenode_cgroups_are_ours_when_no_other_run_is_live(tmp_path: Path) -> None:
    cdi, cgroups = fake_host(tmp_path)
    (cgroups / "cpu" / "kn-before").mkdir()
    before = HostState.take(cdi, cgroups)
    (cgroups / "cpu" / "kn-before" / "kn-nested").mkdir()  # inside a cgroup that was there: not counted
    (cgroups / "memory" / "kubenode-x").mkdir()
    (cgroups / "memory" / "kubenode-x" / "cgroup.procs").write_text("")
    (cgroups / "memory" / "other").mkdir()  # not a kubenode name
    (cdi[1]).mkdir()  # a new /var/run/cdi: the cpu plugin's CDI default turns on
    (cdi[1] / "kubenode-cpuset_kubenode.io_cpu.json").write_text(f'{{"args": ["{REPO}"]}}')
    new = HostState.take(cdi, cgroups).new_since(before)
    assert new == sorted(
        [cgroups / "memory" / "kubenode-x", cdi[1], cdi[1] / "kubenode-cpuset_kubenode.io_cpu.json"]
    )
    attribution = Attribution(os.getpid(), REPO)
    attribution.others = set()  # as on a machine where this is the only run
    failing, unattributed = leaks(new, attribution)
    assert sorted(unattributed) == []
    spec = cdi[1] / "kubenode-cpuset_kubenode.io_cpu.json"
    assert sorted(failing) == sorted(
        [
            f"left behind by this run: {cdi[1]} (in a host CDI spec dir)",
            f"left behind by this run: {spec} (in a host CDI spec dir)",
            f"left behind by this run: {cgroups / 'memory' / 'kubenode-x'} (a cgroup)",
        ]
    )


def test_with_another_run_live_only_what_points_at_this_run_fails(tmp_path: Path) -> None:
    cdi, cgroups = fake_host(tmp_path)
    before = HostState.take(cdi, cgroups)
    other_run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "pytest"])
    theirs_child = subprocess.Popen(["sleep", "60"])  # stands in for a process the other run started
    mine = subprocess.Popen(["sleep", "60"])
    try:
        for name, pid in (("kn-mine", mine.pid), ("kn-theirs", theirs_child.pid), ("kn-empty", None)):
            (cgroups / "cpu" / name).mkdir()
            (cgroups / "cpu" / name / "cgroup.procs").write_text(f"{pid}\n" if pid else "")
        (cdi[0] / "vendor.json").write_text("{}")  # names nobody
        (cdi[0] / "ours.json").write_text(f'{{"path": "{REPO}/.venv/bin/python"}}')
        attribution = Attribution(os.getpid(), REPO)
        attribution.others = {other_run.pid}
        attribution._owner_of_pid = lambda pid: {  # type: ignore[method-assign]
            mine.pid: "ours",
            theirs_child.pid: "theirs",
        }.get(pid, "unknown")
        failing, unattributed = leaks(HostState.take(cdi, cgroups).new_since(before), attribution)
    finally:
        for process in (other_run, theirs_child, mine):
            process.kill()
            process.wait()
    assert sorted(failing) == sorted(
        [
            f"left behind by this run: {cdi[0] / 'ours.json'} (in a host CDI spec dir)",
            f"left behind by this run: {cgroups / 'cpu' / 'kn-mine'} (a cgroup)",
        ]
    )
    maybe = f"new, maybe another run's (pytest {other_run.pid} live)"
    assert sorted(unattributed) == sorted(
        [
            f"{maybe}: {cdi[0] / 'vendor.json'} (in a host CDI spec dir)",
            f"{maybe}: {cgroups / 'cpu' / 'kn-empty'} (a cgroup)",
        ]
    )


def test_a_process_of_this_run_makes_its_cgroup_ours() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        attribution = Attribution(os.getpid(), REPO)
        assert attribution._owner_of_pid(child.pid) == "ours"
        assert attribution._owner_of_pid(1) == "unknown"
        assert (
            os.getpid() not in attribution.others
        )  # this run, and `timeout ... pytest` above it, are not others
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("unified_only", [False, True])
def test_hierarchies_are_found_on_hybrid_and_unified_hosts(tmp_path: Path, unified_only: bool) -> None:
    root = tmp_path / "cgroup"
    if unified_only:
        root.mkdir()
        (root / "cgroup.procs").write_text("")
        (root / "kn-x").mkdir()
        assert HostState.take([], root).cgroups == {root / "kn-x"}
    else:
        _, root = fake_host(tmp_path)
        (root / "cpu" / "kn-x").mkdir()
        assert HostState.take([], root).cgroups == {root / "cpu" / "kn-x"}


def test_the_watcher_keeps_what_it_saw_in_a_cgroup_while_the_run_went_on(tmp_path: Path) -> None:
    _, cgroups = fake_host(tmp_path)
    watcher = Watcher(HostState.take([], cgroups), os.getpid(), REPO, cgroups)
    watcher.start(interval=0.01)
    leaked = cgroups / "cpu" / "kn-leaked"
    leaked.mkdir()
    child = subprocess.Popen(["sleep", "60"])
    (leaked / "cgroup.procs").write_text(f"{child.pid}\n")
    try:
        assert wait_until(lambda: watcher.seen.get(leaked) == "ours", timeout=10)
    finally:
        child.kill()
        child.wait()
    (leaked / "cgroup.procs").write_text("")  # its process gone by the end, as a leaked cgroup's usually is
    seen = watcher.stop()
    attribution = Attribution(os.getpid(), REPO, seen)
    attribution.others = {1}  # another run live: only the watcher's verdict can blame this run
    failing, unattributed = leaks([leaked], attribution)
    assert (failing, unattributed) == ([f"left behind by this run: {leaked} (a cgroup)"], [])


def test_a_cgroup_nobody_can_be_told_of_is_looked_at_less_and_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, cgroups = fake_host(tmp_path)
    watcher = Watcher(HostState.take([], cgroups), os.getpid(), REPO, cgroups)
    orphans = cgroups / "cpu" / "kn-orphans"
    orphans.mkdir()
    (orphans / "cgroup.procs").write_text("1\n")  # init's: nobody's run
    looked: list[int] = []
    real_owner = Attribution.owner

    def counted(self: Attribution, path: Path) -> str:
        if path == orphans:  # not the session's own watcher's looks
            looked.append(watcher._looks)
        return real_owner(self, path)

    monkeypatch.setattr(Attribution, "owner", counted)
    for _ in range(40):
        watcher.look()
    assert watcher.seen[orphans] == "unknown"
    assert looked == [1, 2, 4, 8, 16, 24, 32, 40]
