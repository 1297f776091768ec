"""One pod as the node shows it to its status endpoint, status manager and metrics."""

from __future__ import annotations

from dataclasses import dataclass

from agent.container.podrecord import PodRecord
from kubenode.model import Pod


@dataclass(frozen=True)
class PodView:
    """One pod as the status endpoint shows it."""

    pod: Pod | None
    record: PodRecord
    worker: str
