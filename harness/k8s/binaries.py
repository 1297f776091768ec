"""Where the harness finds the real components: `.k8s/bin/<name>`, the links `make k8s` (tools/k8s_build.py)
leaves to its cached builds, or the directory `KUBENODE_K8S_BIN` names. A missing binary is one clear error
naming the command that builds it; nothing falls back to a binary on PATH (Debian's containerd 1.6 and
runc 1.1 are there, and are not the versions under test)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / ".k8s" / "bin"


class MissingBinary(RuntimeError):
    pass


def bin_dir() -> Path:
    configured = os.environ.get("KUBENODE_K8S_BIN")
    return Path(configured) if configured else DEFAULT_DIR


def binary(name: str) -> Path:
    path = bin_dir() / name
    if not path.exists():
        raise MissingBinary(f"{path}: not built; run `make k8s` (tools/k8s_build.py) first")
    return path.resolve()
