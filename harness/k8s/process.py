"""One long-running child of the interop harness (etcd, kube-apiserver, kubelet, ...): started from an
absolute binary path with its output in a log file, stopped with SIGTERM then SIGKILL, startable again with
the same arguments. Used by every harness/k8s module so each component's lifecycle and its logs look alike.

    proc = ManagedProcess("etcd", [binary("etcd"), "--data-dir", ...], log_dir)
    proc.start(); proc.alive(); proc.log(); proc.stop(); proc.restart()
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the process that started it dies, so a test run killed
    outright (SIGKILL, a CI timeout) leaves no etcd or kube-apiserver behind. The parent must start it from
    a thread that lives as long as the child (the kernel signals on the starting thread's exit): pytest's
    fixtures run on the main thread."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the kernel's pick; a race with another process taking
    it before the component binds it is possible and would show as that component's start failing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ManagedProcess:
    def __init__(
        self,
        name: str,
        argv: Sequence[str | os.PathLike[str]],
        log_dir: Path,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_dir / f"{name}.log"
        self.env = env
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            if self.starts:
                log.write(f"\n----- {self.name} started again -----\n".encode())
                log.flush()
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(self.env or {})},
                cwd=self.cwd,
                start_new_session=True,  # a Ctrl-C of pytest reaches us, not the components directly
                preexec_fn=die_with_parent,
            )
        self.starts += 1

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str = "ready") -> float:
        """Poll `ready` until it holds; seconds taken. Raises with the log's tail if the process exits or
        the deadline passes."""
        started = time.monotonic()
        deadline = started + timeout
        while True:
            if not self.alive():
                code = self.process.returncode if self.process is not None else None
                raise RuntimeError(f"{self.name} exited with {code} before {what}:\n{self.log_tail()}")
            try:
                if ready():
                    return time.monotonic() - started
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not {what} within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)

    def stop(self, grace: float = 10.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def restart(self, grace: float = 10.0) -> None:
        self.stop(grace)
        self.start()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])
