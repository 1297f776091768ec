"""Time stamps as the API wants them: metav1.Time (RFC 3339, whole seconds) and MicroTime (exactly 6 digits).

Go decodes MicroTime with the fixed layout `2006-01-02T15:04:05.000000Z07:00`, so `.103Z`, a bare
`:05Z` or 9 digits all get a 400; Python's isoformat() drops the fraction when it is zero, hence
the explicit format. Parsing is lenient (any fraction, Z or an offset).
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import time


def _utc(wall: float | None) -> dt.datetime:
    return dt.datetime.fromtimestamp(time.time() if wall is None else wall, tz=dt.UTC)


def rfc3339(wall: float | None = None) -> str:
    """metav1.Time: 2026-11-22T20:30:00Z."""
    return _rfc3339_second(math.floor(time.time() if wall is None else wall))


@functools.lru_cache(maxsize=64)
def _rfc3339_second(second: int) -> str:
    """Whole seconds, so the writes of one second (a burst of events) format it once."""
    return _utc(second).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(wall: float | None = None) -> str:
    """metav1.MicroTime: 2026-11-22T20:30:00.000000Z (always six fractional digits)."""
    return _utc(wall).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> float:
    """Seconds since the epoch from an RFC 3339 time with or without a fraction."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    if "." in value:
        head, _, rest = value.partition(".")
        digits = ""
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        value = f"{head}.{(digits + '000000')[:6]}{rest}"
    parsed = dt.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()
