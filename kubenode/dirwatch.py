"""Watch one directory for entries appearing, disappearing or being rewritten (inotify).

A thin wrapper over inotify_simple shared by the device plugin (the kubelet's
socket directory) and the node agent (its manifest directory). It survives the
directory itself being removed and recreated: the parent is watched too, and a
`RESET` event tells the consumer to rescan because events may have been missed.
`read()` blocks until something happens (no polling) and can be woken from
another thread with `wake()`, which makes clean shutdown easy.
"""

from __future__ import annotations

import contextlib
import enum
import os
import select
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

# inotify_simple ships no type information (and pyproject.toml lists no override for it).
from inotify_simple import INotify  # type: ignore[import-untyped]
from inotify_simple import flags as F


class EventKind(enum.Enum):
    CREATED = "created"
    DELETED = "deleted"
    MODIFIED = "modified"
    # The directory was (re)created, removed, or the kernel queue overflowed: rescan.
    RESET = "reset"


@dataclass(frozen=True)
class DirEvent:
    kind: EventKind
    name: str  # entry name inside the directory; "" for RESET


_ENTRY_MASK = F.CREATE | F.DELETE | F.MOVED_FROM | F.MOVED_TO | F.DELETE_SELF | F.MOVE_SELF
_PARENT_MASK = F.CREATE | F.MOVED_TO | F.DELETE | F.MOVED_FROM


class DirWatcher:
    """Events for the entries of `directory`; with `modify=True` also file rewrites."""

    def __init__(self, directory: str | os.PathLike[str], *, modify: bool = False) -> None:
        self.directory = Path(directory).absolute()
        parent = self.directory.parent
        if not parent.is_dir():
            raise FileNotFoundError(f"cannot watch {self.directory}: parent {parent} does not exist")
        self._mask = _ENTRY_MASK | (F.CLOSE_WRITE if modify else 0)
        self._inotify = INotify()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._close_lock = threading.Lock()  # wake() from another thread must never hit a closed (reused) fd
        self._closed = False
        self._parent_wd = self._inotify.add_watch(parent, _PARENT_MASK)
        self._dir_wd: int | None = None
        self._add_dir_watch()

    def _add_dir_watch(self) -> bool:
        try:
            self._dir_wd = self._inotify.add_watch(self.directory, self._mask)
        except (FileNotFoundError, NotADirectoryError):
            self._dir_wd = None
        return self._dir_wd is not None

    def fileno(self) -> int:
        return int(self._inotify.fileno())

    @property
    def wake_fd(self) -> int:
        """The write end of the wake-up pipe (non-blocking): what `signal.set_wakeup_fd` may take, so that
        a signal ends a blocked `read()` whichever thread the kernel gave it to."""
        return self._wake_w

    def wake(self) -> None:
        """Make a blocked `read()` return (with no events); safe from any thread."""
        with self._close_lock:
            if self._closed:
                return
            with contextlib.suppress(BlockingIOError):  # a wake-up is already pending
                os.write(self._wake_w, b"x")

    def read(self, timeout: float | None = None) -> list[DirEvent]:
        """Wait up to `timeout` seconds (None: forever) and return what happened."""
        ready, _, _ = select.select([self._inotify.fileno(), self._wake_r], [], [], timeout)
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_r, 64):
                    pass
        if self._inotify.fileno() not in ready:
            return []
        return self._translate(self._inotify.read(timeout=0))

    def _translate(self, raw: list[Any]) -> list[DirEvent]:
        events: list[DirEvent] = []
        for event in raw:
            wd, mask, name = event.wd, event.mask, event.name
            if mask & F.Q_OVERFLOW:
                events.append(DirEvent(EventKind.RESET, ""))
            elif wd == self._parent_wd:
                if name != self.directory.name:
                    continue
                if mask & (F.CREATE | F.MOVED_TO) and self._add_dir_watch():
                    events.append(DirEvent(EventKind.RESET, ""))
            elif wd == self._dir_wd:
                if mask & (F.DELETE_SELF | F.MOVE_SELF | F.IGNORED):
                    self._drop_dir_watch(mask)
                    events.append(DirEvent(EventKind.RESET, ""))
                elif mask & (F.CREATE | F.MOVED_TO):
                    events.append(DirEvent(EventKind.CREATED, name))
                elif mask & (F.DELETE | F.MOVED_FROM):
                    events.append(DirEvent(EventKind.DELETED, name))
                elif mask & F.CLOSE_WRITE:
                    events.append(DirEvent(EventKind.MODIFIED, name))
        return events

    def _drop_dir_watch(self, mask: int) -> None:
        wd, self._dir_wd = self._dir_wd, None
        if wd is not None and not mask & F.IGNORED:
            with contextlib.suppress(OSError):  # the kernel already dropped it
                self._inotify.rm_watch(wd)
        # The directory may have been recreated before we noticed.
        self._add_dir_watch()

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self._inotify.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def __enter__(self) -> DirWatcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
