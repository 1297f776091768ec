"""One supervised child process of `kubenode up`: started with its output in a log file, stopped in order.

Each child asks the kernel for SIGTERM when `kubenode up` dies (PR_SET_PDEATHSIG), so a crashed `up`
leaves no daemon behind holding the data directory; its pid goes into `<data-dir>/up/<name>.pid`, so the
next `up` can end one that survived anyway (a pid is only signalled while its command line still names
this data directory, since pids are reused).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1
STOP_TIMEOUT_S = 20.0


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """`kubenode <args>` as a child; `log` holds its stdout and stderr."""

    def __init__(self, name: str, args: Sequence[str], run_dir: Path, log_dir: Path) -> None:
        self.name = name
        self.args = list(args)
        self.pid_file = run_dir / f"{name}.pid"
        self.log = log_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRPC_ENABLE_FORK_SUPPORT": "false"}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cli.main", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent,
                # Its own process group: a Ctrl-C on the terminal reaches `up` alone, which then stops
                # the children in reverse order instead of all of them at once.
                start_new_session=True,
            )
        self.pid_file.write_text(f"{self.process.pid}\n")

    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit status."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        with contextlib.suppress(OSError):
            self.pid_file.unlink()
        return process.returncode


def end_leftovers(run_dir: Path, marker: str) -> list[str]:
    """SIGTERM (then SIGKILL) what a crashed `up` left running: the pids in run_dir/*.pid whose command
    line still contains `marker` (the data directory). Returns the names of those ended."""
    ended = []
    for pid_file in sorted(run_dir.glob("*.pid")):
        with contextlib.suppress(ValueError, OSError):
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if marker in cmdline:
                os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + STOP_TIMEOUT_S
                while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                ended.append(pid_file.stem)
        with contextlib.suppress(OSError):
            pid_file.unlink()
    return ended
