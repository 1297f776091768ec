"""Start the plugin under test in its own process group and stop all of it afterwards (no leaked process)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from kubenode.deviceapi import KUBELET_DIR_ENV


class PluginProcess:
    """`command` run by the shell with KUBENODE_KUBELET_DIR set; its output goes to a log file."""

    def __init__(self, command: str, kubelet_dir: Path, env: dict[str, str] | None = None) -> None:
        self.command = command
        self.kubelet_dir = kubelet_dir
        self.env = env or {}  # more variables for the command (the DRA suite's directories)
        # Kept open for the process's lifetime and removed in stop(), so no context manager.
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix="kn-conformance-plugin-", suffix=".log", delete=False
        )
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, on_exit: Callable[[], None] = lambda: None) -> None:
        """Start the command; `on_exit` runs (on a watcher thread) when its shell exits."""
        env = dict(os.environ, **{KUBELET_DIR_ENV: str(self.kubelet_dir)}, **self.env)
        self._proc = subprocess.Popen(
            self.command,
            shell=True,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so the shell's children stop with it
        )
        proc = self._proc

        def watch() -> None:
            proc.wait()
            on_exit()

        threading.Thread(target=watch, name="plugin-exit-watch", daemon=True).start()

    def exit_code(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def log_tail(self, lines: int = 10) -> str:
        text = Path(self._log.name).read_text(errors="replace").strip().splitlines()
        return "\n".join(text[-lines:])

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM to the whole group, SIGKILL after `grace` seconds; always removes the log file."""
        proc = self._proc
        try:
            if proc is not None:
                _signal_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait()
                # Children that outlived the shell are still in the group.
                _signal_group(proc.pid, signal.SIGKILL)
        finally:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
