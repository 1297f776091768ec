"""The node's security settings every runtime applies to the containers it starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SecurityPolicy:
    """The node's side: whether privileged containers may run, and where Localhost seccomp profiles live."""

    allow_privileged: bool = True
    seccomp_root: Path = Path("/var/lib/kubenode/seccomp")
