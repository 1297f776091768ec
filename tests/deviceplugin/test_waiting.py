"""The plugin never waits in silence: it says where it waits for kubelet.sock and reminds every 30 s;
a missing --kubelet-dir is an error (for the plugin and for conformance) unless --create-dirs."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from deviceplugin.manager import WAIT_REMINDER_S, PluginManager
from tests.deviceplugin.conftest import Kubelet, static_config
from tests.deviceplugin.support import CONFIGS

KUBENODE = [sys.executable, "-m", "cli.main"]


def test_logs_the_wait_for_kubelet_sock_then_reminds(
    kubelet_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert WAIT_REMINDER_S == 30.0
    caplog.set_level(logging.INFO, logger="deviceplugin.manager")
    manager = PluginManager(static_config(), str(kubelet_dir), wait_reminder_s=0.2)
    thread = threading.Thread(target=manager.run, daemon=True)
    thread.start()
    kubelet: Kubelet | None = None
    try:

        def waiting_lines() -> list[str]:
            return [r.getMessage() for r in caplog.records if "kubelet.sock" in r.getMessage()]

        deadline = time.monotonic() + 10
        while len(waiting_lines()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        first, second, *_ = waiting_lines()
        assert first == f"waiting for kubelet.sock in {kubelet_dir}"
        assert second.startswith(f"still waiting for kubelet.sock in {kubelet_dir} (")
        assert all(r.levelno == logging.INFO for r in caplog.records if "waiting" in r.getMessage())
        kubelet = Kubelet(kubelet_dir, tmp_path)
        assert manager.all_registered.wait(10)
        seen = len(waiting_lines())
        time.sleep(0.5)  # more than two reminder periods: registered, so no more reminders
        assert len(waiting_lines()) == seen
    finally:
        manager.stop()
        thread.join(10)
        if kubelet is not None:
            kubelet.stop()


@pytest.mark.parametrize(
    "command",
    [
        lambda d: ["deviceplugin", "--config", str(CONFIGS / "static.yaml"), "--kubelet-dir", d],
        lambda d: ["conformance", "--kubelet-dir", d, "--register-timeout", "0.1"],
    ],
    ids=["deviceplugin", "conformance"],
)
def test_a_missing_kubelet_dir_is_an_error(tmp_path: Path, command: Callable[[str], list[str]]) -> None:
    missing = tmp_path / "kubelet-typo"
    result = subprocess.run([*KUBENODE, *command(str(missing))], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert str(missing) in line and "does not exist" in line and "--create-dirs" in line
    assert not missing.exists()


def test_create_dirs_makes_the_kubelet_dir(tmp_path: Path) -> None:
    made = tmp_path / "made"
    result = subprocess.run(
        [*KUBENODE, "conformance", "--kubelet-dir", str(made), "--create-dirs", "--register-timeout", "0.1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.is_dir(), result.stderr
