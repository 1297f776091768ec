"""Kill cycles for CRI pods (harness/crikillcycles.py): an agent SIGKILLed after RunPodSandbox,
CreateContainer, StartContainer and during termination, then restarted, leaves exactly the wanted containers
in containerd and no pod cgroup of any other pod, in any v1 hierarchy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.volumemanager.mountutil import unmount_all_under
from harness.containerd import ContainerdProcess
from harness.crikillcycles import KILL_POINTS
from tests.agent.support import swept_cgroup_root

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(600)  # ten cycles of two agents and two pods each: 1.5 to 4 minutes here


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    yield from swept_cgroup_root("kn-crikill")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-crikill-", dir="/tmp"))
    yield path
    unmount_all_under(path)
    shutil.rmtree(path, ignore_errors=True)


def test_sigkill_across_sync_pod_leaves_one_container_each_and_nothing_else(
    containerd: ContainerdProcess, cgroup_root: str, short_dir: Path
) -> None:
    manifests, state, logs = short_dir / "m", short_dir / "s", short_dir / "logs"
    manifests.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.crikillcycles",
            cgroup_root,
            str(manifests),
            str(state),
            containerd.endpoint,
            str(logs),
            str(len(KILL_POINTS)),
            "2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=540,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"CRI kill cycles: {figures}")
    assert figures["agents_that_died_on_their_own"] == [], (figures, result.stderr[-3000:])
    assert figures["missed_kill_points"] == 0, figures
    assert figures["unclean_cycles"] == [], figures
