"""Waiting on the main thread for a stop that a signal handler sets.

Python runs a signal handler on the main thread only, and only when that thread next runs bytecode. The
kernel hands a process-directed signal to any thread that does not block it, and passes the main thread by
when it already has a signal pending (a pod's SIGCHLD). A main thread parked in one long wait (an Event
without a timeout, a select on a watch) then never sees a SIGTERM that landed on a gRPC or worker thread, and
the process is left to its supervisor's SIGKILL. So the main threads of kubenode's daemons and harnesses wait
in slices of STOP_CHECK_S: a stop is acted on at most that late, for a wakeup every half second. (The device
plugin, idle for hours, waits on its watch instead and has every signal write to the watch's wake-up pipe,
`signal.set_wakeup_fd`: deviceplugin/manager.py.)
"""

from __future__ import annotations

import threading

STOP_CHECK_S = 0.5  # how soon a SIGTERM that landed on another thread is acted on


def wait_for_stop(stopping: threading.Event) -> None:
    """Return once `stopping` is set, waking every STOP_CHECK_S so a pending handler gets to run."""
    while not stopping.wait(STOP_CHECK_S):
        pass
