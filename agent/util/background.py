"""BackgroundLoop: one daemon thread running `_run()` until `stop()`, with a doorbell (`_wake`).

The cluster parts of the agent (node status, pod status, mirror pods) each own one such loop: `_run`
waits on `_wake` (with a timeout for its period), returns once `_stop` is set; `stop()` sets both
and joins the thread.
"""

from __future__ import annotations

import threading


class BackgroundLoop:
    thread_name = "background"

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _run(self) -> None:
        raise NotImplementedError
