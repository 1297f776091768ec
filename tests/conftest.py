"""Session-wide: the run fails if it left a file in the host's CDI spec dirs or a kubenode/kn- cgroup.

The snapshot is taken before the first test and compared after the last fixture's teardown
(tests/leakcheck.py says what counts as this run's); `pytest_sessionfinish` prints one line per path and
sets the exit status. `make test` runs tools/cgroup2_guest.py before pytest: that part is not covered.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.leakcheck import Attribution, HostState, Watcher, leaks

REPO = Path(__file__).resolve().parents[1]
LEAKS = pytest.StashKey[tuple[list[str], list[str]]]()


@pytest.fixture(scope="session", autouse=True)
def host_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    before = HostState.take()
    watcher = Watcher(before, os.getpid(), REPO)
    watcher.start()
    yield
    seen = watcher.stop()
    new = HostState.take().new_since(before)
    if new:
        request.config.stash[LEAKS] = leaks(new, Attribution(os.getpid(), REPO, seen))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    failing, unattributed = session.config.stash.get(LEAKS, ([], []))
    if not failing and not unattributed:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str, **markup: bool) -> None:
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(line, **markup)
        else:
            print(line)

    for line in unattributed:
        say(f"host check: {line}", yellow=True)
    for line in failing:
        say(f"host check FAILED: {line}", red=True)
    if failing and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
