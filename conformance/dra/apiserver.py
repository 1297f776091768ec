"""An embedded `kubenode apiserver` for the DRA suite: the driver publishes its slices to it and reads the
claims the suite allocates. Started as a child process on a free port with a fresh data directory,
stopped (and its directory removed) afterwards."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

START_S = 60.0
_SERVING = re.compile(r"serving on (\S+)")


class EmbeddedApiServer:
    def __init__(self) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="kn-conf-api-"))
        self.kubeconfig = self.data_dir / "admin.kubeconfig"
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "apiserver", "--data-dir", str(self.data_dir), "--port", "0",
             "--bind-address", "127.0.0.1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        seen = threading.Event()

        def read(proc: subprocess.Popen[str]) -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                self._lines.append(line)
                match = _SERVING.search(line)
                if match and not seen.is_set():
                    self.url = match.group(1)
                    seen.set()

        threading.Thread(target=read, args=(self._proc,), daemon=True).start()
        deadline = time.monotonic() + START_S
        while not seen.wait(0.1):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    "the embedded kubenode apiserver did not start:\n" + "".join(self._lines[-10:])
                )

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)
