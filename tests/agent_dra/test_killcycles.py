"""SIGKILL the agent's DRA manager at moving points (harness/drakillcycles.py): no claim is prepared twice
by its driver and none is leaked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_kill_cycles_neither_prepare_twice_nor_leak(dirs: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "harness.drakillcycles", str(dirs / "kill"), "14"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=110,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["cycles"] == 14
    assert result["double_prepares"] == 0
    assert result["leaked"] == 0
    assert result["driver_prepares"] >= 3  # the recovering agent's at least
