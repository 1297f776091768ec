"""Eviction thresholds as the kubelet states them: `signal<quantity` or `signal<percent%`, hard or soft.

`parse_thresholds("memory.available<100Mi,nodefs.available<10%")` (or the config file's mapping
`{memory.available: 100Mi}`) gives `Threshold`s; soft ones take their grace period from
`evictionSoftGracePeriod` (`memory.available=1m30s`), and every one its minimum reclaim from
`evictionMinimumReclaim`. An unknown signal, a bad quantity or a soft threshold without a grace period is a
`ValueError` naming it. The kubelet's default hard thresholds are `DEFAULT_HARD`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubenode.model.quantity import to_amount

SIGNALS = (
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
DEFAULT_HARD = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%"
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?$")


@dataclass(frozen=True)
class Threshold:
    signal: str
    quantity: int | None = None  # an absolute amount (bytes, inodes, pids) ...
    percent: float | None = None  # ... or a share of the capacity, 0-100
    grace_period: float = 0.0  # soft thresholds only
    min_reclaim: int = 0
    min_reclaim_percent: float = 0.0
    soft: bool = False

    def value(self, capacity: int) -> int:
        """The threshold's amount for this capacity."""
        if self.quantity is not None:
            return self.quantity
        return int(capacity * (self.percent or 0.0) / 100)

    def reclaim_target(self, capacity: int) -> int:
        """Available must reach the threshold plus the minimum reclaim before pressure ends."""
        extra = self.min_reclaim or int(capacity * self.min_reclaim_percent / 100)
        return self.value(capacity) + extra

    def __str__(self) -> str:
        amount = f"{self.percent:g}%" if self.percent is not None else str(self.quantity)
        return f"{self.signal}<{amount}"


def parse_duration(text: str) -> float:
    """Go's time.Duration text as the kubelet takes it (1m30s, 90s, 1h)."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"{text!r} is not a duration such as 90s or 1m30s")
    hours, minutes, seconds = (float(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def _pairs(value: Any, separator: str, what: str) -> dict[str, str]:
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if not isinstance(value, str):
        raise ValueError(f"{what}: must be a string or a mapping, got {value!r}")
    pairs = {}
    for item in value.split(","):
        name, sep, amount = item.partition(separator)
        if not sep or not name.strip() or not amount.strip():
            raise ValueError(f"{what}: {item.strip()!r} is not signal{separator}value")
        pairs[name.strip()] = amount.strip()
    return pairs


def _amount(signal: str, text: str, what: str) -> tuple[int | None, float | None]:
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            raise ValueError(f"{what}: {signal}: {text!r} is not a percentage") from None
        if not 0 <= percent <= 100:
            raise ValueError(f"{what}: {signal}: {text!r} must be between 0% and 100%")
        return None, percent
    try:
        return to_amount("memory", text), None  # a plain count for inodes and pids, bytes otherwise
    except ValueError as exc:
        raise ValueError(f"{what}: {signal}: {exc}") from None


def parse_thresholds(hard: Any, soft: Any = "", grace: Any = "", reclaim: Any = "") -> list[Threshold]:
    grace_periods = {k: parse_duration(v) for k, v in _pairs(grace, "=", "evictionSoftGracePeriod").items()}
    minimums = {
        k: _amount(k, v, "evictionMinimumReclaim")
        for k, v in _pairs(reclaim, "=", "evictionMinimumReclaim").items()
    }
    result = []
    for what, raw, is_soft in (("evictionHard", hard, False), ("evictionSoft", soft, True)):
        for signal, text in _pairs(raw, "<" if isinstance(raw, str) else "=", what).items():
            if signal not in SIGNALS:
                raise ValueError(f"{what}: unknown eviction signal {signal!r} (known: {', '.join(SIGNALS)})")
            quantity, percent = _amount(signal, text, what)
            if is_soft and signal not in grace_periods:
                raise ValueError(
                    f"evictionSoftGracePeriod: {signal} has a soft threshold but no grace period"
                )
            minimum, minimum_percent = minimums.get(signal, (0, 0.0))
            result.append(
                Threshold(
                    signal,
                    quantity,
                    percent,
                    grace_periods.get(signal, 0.0) if is_soft else 0.0,
                    minimum or 0,
                    minimum_percent or 0.0,
                    is_soft,
                )
            )
    return result
