"""The kubelet's crash-loop backoff for container restarts (flowcontrol.Backoff, 10 s doubling to 300 s).

Per pod/container key, exactly as the kubelet's `doBackOff` uses it: a container that
exited at `finished_at` may restart once `backoff` seconds have passed since then. The
first restart happens at once and arms a 10 s backoff; each later restart doubles it, up
to 300 s. If a container finishes more than 10 minutes (2 x the maximum) after its last
restart, i.e. it ran fine for that long, the backoff starts again at 10 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

INITIAL_BACKOFF_S = 10.0
MAX_BACKOFF_S = 300.0


@dataclass
class _Entry:
    backoff: float
    last_update: float


class CrashLoopBackoff:
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        initial: float = INITIAL_BACKOFF_S,
        maximum: float = MAX_BACKOFF_S,
    ) -> None:
        self._clock = clock
        self.initial = initial
        self.maximum = maximum
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def remaining(self, key: str, finished_at: float) -> float:
        """Seconds until a container that finished at `finished_at` may restart (0: now)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return 0.0
            return max(0.0, entry.backoff - (self._clock() - finished_at))

    def restarted(self, key: str, finished_at: float) -> None:
        """Record a restart (the kubelet's backOff.Next): arm or double the backoff."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or finished_at - entry.last_update > 2 * self.maximum:
                entry = self._entries[key] = _Entry(self.initial, 0.0)
            else:
                entry.backoff = min(entry.backoff * 2, self.maximum)
            entry.last_update = self._clock()

    def current(self, key: str) -> float | None:
        with self._lock:
            entry = self._entries.get(key)
            return entry.backoff if entry else None

    def forget_prefix(self, prefix: str) -> None:
        """Drop every key of one pod (keys are `<uid>/<container>`)."""
        with self._lock:
            for key in [k for k in self._entries if k.startswith(prefix)]:
                del self._entries[key]
