"""`kubenode up --once --plugin-config`: the given plugin config is what the node advertises; with no pods
to apply it exits 0 at once and leaves no daemon running."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from tests.deviceplugin.support import cpu_config

REPO = Path(__file__).resolve().parents[2]


def test_up_once_with_the_cpu_plugin_alone(tmp_path: Path) -> None:
    pods = tmp_path / "no-pods"
    pods.mkdir()
    # Short: the plugin sockets go under it, and a unix socket path has at most 107 bytes.
    data = Path(tempfile.mkdtemp(prefix="kn-dp-up-", dir="/tmp"))
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "up", "--once", "--port", "0", "--data-dir", str(data),
         "--plugin-config", str(cpu_config(data)), "--pods", str(pods),
         "--cgroup-root", f"/kn-dp-up-{uuid.uuid4().hex[:8]}"],
        capture_output=True, text=True, timeout=90, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    ready = next(
        line for line in result.stdout.splitlines() if line.startswith("kubenode up: deviceplugin ready")
    )
    assert ready.endswith(f"kubenode.io/cpu={os.cpu_count()}"), ready
    assert "0/0 pods got what they asked for" in result.stdout
    assert not list((data / "up").glob("*.pid")), "a daemon was left running"
    shutil.rmtree(data)
