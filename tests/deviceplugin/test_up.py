"""`kubenode up --once`: device manager plus CPU plugin on a private dir; prints devices, cleans up."""

from __future__ import annotations

import os
import subprocess
import sys


def test_up_once_prints_cpu_devices_and_exits() -> None:
    before = {p for p in os.listdir("/tmp") if p.startswith("kubenode-up-")}
    result = subprocess.run(
        [sys.executable, "-m", "kubenode.cli", "up", "--once"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    cpus = os.cpu_count()
    assert f"kubenode.io/cpu: capacity {cpus}, allocatable {cpus}, allocated 0 (connected)" in result.stdout
    assert "cpu0  Healthy" in result.stdout
    assert "WARNING" not in result.stderr
    assert {p for p in os.listdir("/tmp") if p.startswith("kubenode-up-")} == before
