"""A warning that would repeat, logged once with a count.

A condition re-checked in a loop (a control file re-read on every change, a poll) would otherwise log the
same line each time: hundreds of them drown everything else. `RepeatedWarning` logs the first occurrence
of each key with a note that repeats are counted, counts the rest (also after the condition went away and
came back), and logs each count once, at close().
"""

from __future__ import annotations

import logging
from collections.abc import Hashable


class RepeatedWarning:
    def __init__(self, logger: logging.Logger, template: str) -> None:
        """`template` is a %-format for the key's arguments, e.g. "%s names unknown device %r; ignored"."""
        self._log = logger
        self._template = template
        self._seen: dict[Hashable, tuple[tuple[object, ...], int]] = {}

    def warn(self, key: Hashable, *args: object) -> None:
        if key in self._seen:
            first, count = self._seen[key]
            self._seen[key] = (first, count + 1)
            return
        self._seen[key] = (args, 1)
        self._log.warning(self._template + " (repeats are counted, not logged)", *args)

    def close(self) -> None:
        """Log how often each repeated warning occurred, and start afresh."""
        for args, count in self._seen.values():
            if count > 1:
                self._log.warning(self._template + " (%d times in all)", *args, count)
        self._seen.clear()
