"""How a fleet process runs its nodes' loops: on gevent's one event loop (default), or on OS threads.

A hollow node keeps the real agent's loops, each written as a thread that blocks on an Event, a
socket or a queue (the Lease renewer, node status, the pod informer's watch, the pod source, the
status manager and its writers, events, mirror pods, the prober, the log manager, the PLEG loop,
a worker per busy pod): about 10 a node, 500-600 in a process of 50 nodes. As OS threads they all
contend for one GIL, and past a few hundred runnable at once most of the process's CPU went to GIL
hand-offs and the kernel's futex and scheduler work (docs/scale.md). With the `gevent` driver,
`patch("gevent")` runs before anything else is imported and turns `threading`, `socket`, `ssl`,
`select`, `queue` and `time.sleep` cooperative: every one of those loops is then a greenlet, all
of them driven by one libev loop on one OS thread. Its timer heap wakes the Lease renewals, the
node-status checks and the relists when due, and its epoll set reads every node's pod watch and
hands each event to the informer that waits for it; a switch between them is a few microseconds,
with no lock, no futex and no GIL hand-off. The agent's code is unchanged and still runs in full on
the API path (kubemark's hollow kubelets are the real kubelet's goroutines on Go's scheduler in the
same way). The `threads` driver keeps every loop an OS thread, as `kubenode agent` runs them: the
earlier fleets, kept for A/B runs.

Under gevent a greenlet that computes without blocking holds the process until it blocks (no
preemption): every loop of the agent blocks on I/O or a wait within milliseconds, so the nodes
take turns at those points.
"""

from __future__ import annotations

import cProfile
import sys
import time
from pathlib import Path

DRIVERS = ("gevent", "threads")
DEFAULT_DRIVER = "gevent"


class DriverUnavailable(RuntimeError):
    pass


def patch(driver: str) -> None:
    """Make the process cooperative for `driver` (call before importing the agent: its modules keep
    references to `threading` and `socket`). A no-op for `threads`."""
    if driver == "threads":
        return
    try:
        from gevent import monkey
    except ImportError:
        raise DriverUnavailable("--driver gevent: gevent is not installed (pip install gevent)") from None
    monkey.patch_all()


def patched() -> bool:
    """True when the process runs on gevent's loop (`patch("gevent")` has run)."""
    gevent_monkey = sys.modules.get("gevent.monkey")
    return bool(gevent_monkey is not None and gevent_monkey.is_module_patched("threading"))


class LoopProfile:
    """cProfile of the process's one OS thread, timed by its CPU time: under gevent that thread runs every
    greenlet, so this is where the whole fleet's Python CPU goes (each greenlet switch shows as a call
    returning into the hub, so read the totals by function, not the call tree)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._profile = cProfile.Profile(time.thread_time)

    def start(self) -> None:
        self._profile.enable()

    def restart(self) -> None:
        """Drop what was profiled so far and profile from now (SIGUSR1: a benchmark's quiet window only)."""
        self._profile.disable()
        self._profile = cProfile.Profile(time.thread_time)
        self._profile.enable()

    def stop(self) -> None:
        self._profile.disable()
        self._profile.dump_stats(str(self.path))
