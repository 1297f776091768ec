"""`ControllerManagerProcess`: the real `kubenode controller-manager` as a subprocess.

    with ControllerManagerProcess(api.data_dir / "controller-manager.kubeconfig") as cm:
        ...                                    # Nodes get their NoSchedule taints from their conditions
    cm.output()                                # what it logged, for a failing test's message

`close()` sends SIGTERM (the Lease is released) and returns its exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType

REPO = Path(__file__).resolve().parents[1]


class ControllerManagerProcess:
    def __init__(self, kubeconfig: Path, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "controller-manager", "--kubeconfig", str(kubeconfig), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=REPO,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines[-100:])

    def close(self, timeout: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._reader.join(2)
        return self.process.returncode

    def __enter__(self) -> ControllerManagerProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
