"""Fixtures for the tests that run INSIDE a cgroup v2 guest (`make test-cgroup2`, tools/cgroup2_guest.py).

The modules here are named `guest_*.py`, not `test_*.py`, so the host's plain `pytest` run never
collects them (this host is a v1 hybrid); the guest runner names them explicitly. Run anywhere
else they fail at once, saying the kernel is not cgroup v2 (never a skip). `test_runner.py` is the
one host test here: it checks the runner itself.

Every test gets a unique root (/kn-guest-<random>) that is killed (cgroup.kill) and removed at
teardown; a leak fails the test. Summary lines (controllers, cgroup files, measured quota)
go through the `transcript` fixture: printed at the end of the run and appended to
$KUBENODE_CGROUP2_GUEST_OUT/summary.txt, which the host runner reads back.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cm.cgroups.detect import CGROUP2_SUPER_MAGIC, filesystem_magic
from kubenode.cgroupsweep import sweep_v2_root
from tests.cgroup2_guest.support import GUEST_ENV, MOUNT

NEEDED_CONTROLLERS = ("cpu", "cpuset", "memory", "pids")
_LINES: list[str] = []


class Transcript:
    def __init__(self, out_dir: str | None) -> None:
        self._dir = Path(out_dir) if out_dir else None

    def _append(self, name: str, text: str) -> None:
        if self._dir is not None:
            with (self._dir / name).open("a", encoding="utf-8") as handle:
                handle.write(text + "\n")

    def line(self, text: str) -> None:
        _LINES.append(text)
        self._append("summary.txt", text)


def require_cgroup2() -> None:
    if os.geteuid() != 0:
        pytest.fail("the cgroup v2 guest tests need root")
    if filesystem_magic(MOUNT) != CGROUP2_SUPER_MAGIC:
        pytest.fail(
            f"{MOUNT} is not a cgroup2 mount: these tests run inside the v2 guest "
            "(make test-cgroup2 / tools/cgroup2_guest.py), not on this hybrid host"
        )
    offered = (MOUNT / "cgroup.controllers").read_text().split()
    missing = [name for name in NEEDED_CONTROLLERS if name not in offered]
    if missing:
        pytest.fail(f"the guest kernel's cgroup2 lacks controllers: {', '.join(missing)}")


@pytest.fixture(scope="session")
def transcript() -> Transcript:
    require_cgroup2()
    return Transcript(os.environ.get(GUEST_ENV))


@pytest.fixture
def v2_root(transcript: Transcript) -> Iterator[str]:
    root = f"/kn-guest-{uuid.uuid4().hex[:10]}"
    yield root
    left = sweep_v2_root(root)
    assert not left, f"cgroups leaked: {left}"


@pytest.fixture(scope="session")
def warm_imports() -> None:
    """Import what `kubenode agent` and `kubenode deviceplugin` run, once, before anything is forked.

    Under emulation each import of the agent costs ~40 s; forked children (support.fork_cli) share
    this process's modules and start at once. Nothing here starts a thread, so forking stays safe.
    """
    import agent.daemon
    import cli.main
    import deviceplugin.backend
    import deviceplugin.config
    import deviceplugin.endpoint
    import deviceplugin.manager

    cli.main.build_parser()  # imports every command's module
    assert agent.daemon and deviceplugin.backend and deviceplugin.config
    assert deviceplugin.endpoint and deviceplugin.manager


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Under emulation a run is long: show each failure and each test's time as it happens."""
    if not os.environ.get(GUEST_ENV):
        return  # on the host (test_runner.py) pytest's own report is enough
    if report.when == "call" or report.failed:
        print(
            f"\n[guest] {report.nodeid} {report.when}: {report.outcome} in {report.duration:.1f} s",
            flush=True,
        )
    if report.failed:
        print(report.longreprtext, flush=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _LINES:
        terminalreporter.section("cgroup v2 guest summary")
        for text in _LINES:
            terminalreporter.write_line(text)
