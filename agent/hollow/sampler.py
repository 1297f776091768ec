"""A stack sampler for a hollow fleet: where its threads spend their time (py-spy is not installed here).

`StackSampler(path).start()` runs one daemon thread that, every `interval` seconds, reads every
thread's current frame (`sys._current_frames()`) and counts, per thread, the innermost frame
and the innermost frame of this repository's code (`agent/`, `kubenode/`): which lines run and
which of our callers waits. `stop()` writes the counts, most frequent first, to `path`. A sample
is taken while the sampler holds the GIL, so a thread seen "in" a C call that releases the GIL
(a socket read, a lock wait) is waiting, not running: read the counts as where threads are,
and the process's user/system CPU for how much of that is work.
"""

from __future__ import annotations

import collections
import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path
from types import FrameType

OUR_CODE = ("/agent/", "/kubenode/")


def _where(frame: FrameType) -> str:
    code = frame.f_code
    return f"{code.co_filename.rsplit('/', 2)[-2:][-1]}:{frame.f_lineno} {code.co_name}"


def _ours(frame: FrameType | None) -> str:
    while frame is not None:
        if any(part in frame.f_code.co_filename for part in OUR_CODE):
            return _where(frame)
        frame = frame.f_back
    return "-"


class StackSampler:
    def __init__(self, path: Path, interval: float = 0.01) -> None:
        self.path = path
        self.interval = interval
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            self.samples += 1
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    self.counts[(_where(frame), _ours(frame))] += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        lines = [f"{self.samples} samples; threads seen per sample, by innermost frame | our innermost frame"]
        for (inner, ours), count in self.counts.most_common(200):
            lines.append(f"{count / max(self.samples, 1):9.2f}  {inner:50s} | {ours}")
        self.path.write_text("\n".join(lines) + "\n")


class ThreadProfiles:
    """cProfile in every thread started after `start()` (one Profile each, timed by the thread's own CPU
    time), merged into one pstats file at `stop()`: where the process's CPU goes, by function, across
    all its threads (the profiled process runs about 2x slower)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _boot(self, frame: FrameType, event: str, arg: object) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile(
            time.thread_time
        )  # CPU, not wall: a thread waiting for the GIL costs nothing
        with self._lock:
            self._profiles.append(profile)
        profile.enable()

    def start(self) -> None:
        threading.setprofile(self._boot)

    def stop(self) -> None:
        threading.setprofile(None)
        with self._lock:
            profiles = list(self._profiles)
        stats = pstats.Stats(profiles[0]) if profiles else None
        for profile in profiles[1:]:
            if stats is not None:
                stats.add(profile)
        if stats is not None:
            stats.dump_stats(str(self.path))
