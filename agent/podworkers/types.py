"""The pod workers' vocabulary: update and work types, a sync's context and result, and the syncer's contract.

Shared by the workers (workers.py), which call a `PodSyncer`, and podsync.py, which implements it.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kubenode.model import Pod


class UpdateType(enum.IntEnum):
    SYNC = 0
    UPDATE = 1
    CREATE = 2
    KILL = 3


class WorkType(enum.StrEnum):
    SYNC = "syncing"
    TERMINATING = "terminating"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class UpdatePodOptions:
    update_type: UpdateType
    pod: Pod
    # KillPodOptions: a grace period override (seconds) and whether this is an eviction.
    grace_period_override: int | None = None
    evict: bool = False
    # Set once the pod has finished terminating (at once if it already has).
    completed: threading.Event | None = None


@dataclass(frozen=True)
class SyncResult:
    terminal: bool = False  # the pod reached Succeeded/Failed: start terminating it
    requeue_after: float | None = None  # resync sooner than the resync interval


class SyncContext:
    """What a running sync can see of its worker: cancellation and the current grace period."""

    def __init__(self, cancelled: threading.Event, grace: Callable[[], int]) -> None:
        self.cancelled = cancelled
        self._grace = grace

    def grace_period(self) -> int:
        """The effective grace period right now; it may shrink while a kill is in progress."""
        return self._grace()


class SyncHandler(Protocol):
    """What the pod workers call for one pod (podsync.PodSyncer implements it)."""

    def sync_pod(self, update_type: UpdateType, pod: Pod, ctx: SyncContext) -> SyncResult: ...

    def sync_terminating_pod(self, pod: Pod, ctx: SyncContext) -> None: ...

    def sync_terminated_pod(self, pod: Pod, ctx: SyncContext) -> None: ...


def effective_grace_period(current: int, pod: Pod, override: int | None) -> tuple[int, bool]:
    """The kubelet's calculateEffectiveGracePeriod: (grace seconds, whether it was shortened)."""
    grace = current
    overridden = False
    deletion = pod.deletion_grace_period_seconds
    if deletion is not None and (grace == 0 or deletion < grace):
        grace, overridden = deletion, True
    if override is not None and (grace == 0 or override < grace):
        grace, overridden = override, True
    if not overridden and grace == 0:
        grace = pod.termination_grace_period_seconds
    grace = max(grace, 1)
    return grace, current != 0 and current != grace
