"""The kubelet's pod work queue: pod UIDs due for another sync at a given time (clock injectable).

`enqueue` overwrites the due time of a UID (as the kubelet's queue does); `get_work` pops
every UID whose time has come. A condition lets the agent's sync loop sleep until the
earliest due time instead of polling.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class WorkQueue:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._due: dict[str, float] = {}
        self._cond = threading.Condition()

    def enqueue(self, uid: str, delay: float) -> None:
        with self._cond:
            self._due[uid] = self._clock() + max(0.0, delay)
            self._cond.notify_all()

    def forget(self, uid: str) -> None:
        with self._cond:
            self._due.pop(uid, None)

    def get_work(self) -> list[str]:
        now = self._clock()
        with self._cond:
            ready = [uid for uid, at in self._due.items() if at <= now]
            for uid in ready:
                del self._due[uid]
        return ready

    def due_at(self, uid: str) -> float | None:
        with self._cond:
            return self._due.get(uid)

    def next_due(self) -> float | None:
        with self._cond:
            return min(self._due.values(), default=None)

    def wait(self, timeout: float) -> None:
        """Sleep up to `timeout` seconds, waking early when a UID comes due (one enqueued with no delay, or
        one whose time comes before then). A UID enqueued for later does not wake the sleeper: each sync
        queues its own resync a minute ahead, and 110 pods starting at once woke the loop (and its relist
        of every pod) 110 times."""
        deadline = self._clock() + timeout
        with self._cond:
            while True:
                now = self._clock()
                wake_at = min(deadline, min(self._due.values(), default=deadline))
                if now >= wake_at or not self._cond.wait(wake_at - now):
                    return
