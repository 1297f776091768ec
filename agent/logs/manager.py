"""The container log manager: the kubelet's periodic rotation of running containers' logs.

Every `interval` seconds (containerLogMonitorInterval, 10 s) the loop asks the node for the live log of
every running container and rotates each whose live region is over `max_size` bytes (containerLogMaxSize,
10 Mi), keeping at most `max_files` files per container restart (containerLogMaxFiles, 5): a process
container's in place (rotation.py), a CRI container's (a `LiveLog` with the runtime's `reopen`) renamed
and reopened by the runtime, older ones compressed (renaming.py). A log that cannot be rotated (gone, a
full disk, a runtime that fails to reopen it) is logged once per check and tried again at the next.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from agent.logs.renaming import rotate_renamed
from agent.logs.rotation import live_size, rotate
from agent.util.background import BackgroundLoop

log = logging.getLogger(__name__)

DEFAULT_MAX_SIZE = 10 * 2**20
DEFAULT_MAX_FILES = 5
DEFAULT_INTERVAL_S = 10.0


@dataclass(frozen=True)
class LiveLog:
    path: Path
    reopen: Callable[[], None] | None = None  # the runtime's ReopenContainerLog; None: rotated in place


class ContainerLogManager(BackgroundLoop):
    thread_name = "container-logs"

    def __init__(
        self,
        live_logs: Callable[[], Iterable[Path | LiveLog]],
        max_size: int = DEFAULT_MAX_SIZE,
        max_files: int = DEFAULT_MAX_FILES,
        interval: float = DEFAULT_INTERVAL_S,
    ) -> None:
        super().__init__()
        self._live_logs = live_logs
        self.max_size = max_size
        self.max_files = max_files
        self.interval = interval
        self.rotations = 0

    def check_once(self) -> None:
        for item in self._live_logs():
            live = item if isinstance(item, LiveLog) else LiveLog(item)
            if live_size(live.path) <= self.max_size:
                continue
            try:
                if live.reopen is not None:
                    rotated = rotate_renamed(live.path, self.max_files, live.reopen)
                else:
                    rotated = rotate(live.path, self.max_files)
            except (OSError, RuntimeError) as exc:
                log.warning("cannot rotate %s: %s", live.path, exc)
                continue
            if rotated:
                self.rotations += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self.check_once()
            self._wake.wait(self.interval)
            self._wake.clear()
