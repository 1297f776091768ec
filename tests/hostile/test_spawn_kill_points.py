"""An agent SIGKILLed at an exact point of a container's spawn never starts the container twice: the kill
is injected in agent A (harness/spawnkill.py), a plain agent B restarts on the same state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.volumemanager.mountutil import unmount_all_under
from harness.spawnkill import POINTS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_each_point_of_a_spawn_starts_the_container_once(
    cgroup_root: str, short_dir: Path, point: str
) -> None:
    manifests, state = short_dir / "m", short_dir / "s"
    manifests.mkdir()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "harness.spawnkill", cgroup_root, str(manifests), str(state), point],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    finally:
        unmount_all_under(state)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"spawn kill: {figures}")
    assert figures["agent_a_killed"], figures
    assert figures["starts"] == figures["copies"] == 1, (figures, result.stderr[-3000:])
    assert not os.path.lexists("/kn-hostile-volumes"), "a mountPath was made on the host"
