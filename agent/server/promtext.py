"""Counters, histograms and gauges with labels, written in the Prometheus text format (version 0.0.4).

The agent's few kubelet metrics (metrics.py) need only these three kinds: `Counter.labels(...).inc()`,
`Histogram.labels(...).observe(s)` (cumulative `le` buckets, `_sum`, `_count`), a gauge set by hand or
counted when scraped. prometheus_client, which the device plugin uses, costs ~2 MiB of a joined agent's
memory for them, so the agent writes the format itself: `# HELP` and `# TYPE` lines, then one line per
series, `name{label="value",...} value`, label values escaped (backslash, quote, newline) and values as
Python floats print them (`1.0`, `+Inf`). Each metric takes its own lock: observers call from the pod
workers and the device manager's threads while a scrape renders.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence

Labels = tuple[str, ...]


def _number(value: float) -> str:
    """As Go (and prometheus_client) print a float: `1.0`, `0.005`, `+Inf`, `1.5e+07`."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:  # Go switches to an exponent sooner than Python
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def series(name: str, names: Sequence[str], values: Sequence[str], value: float) -> str:
    """One sample line: `name{a="x",b="y"} 1.0` (no braces without labels)."""
    if not names:
        return f"{name} {_number(value)}"
    pairs = ",".join(f'{n}="{_escape(v)}"' for n, v in sorted(zip(names, values, strict=True)))
    return f"{name}{{{pairs}}} {_number(value)}"


def header(name: str, help_text: str, kind: str) -> list[str]:
    escaped = help_text.replace("\\", r"\\").replace("\n", r"\n")
    return [f"# HELP {name} {escaped}", f"# TYPE {name} {kind}"]


class _Metric:
    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)
        self._lock = threading.Lock()

    def _key(self, values: Iterable[str]) -> Labels:
        key = tuple(str(v) for v in values)
        if len(key) != len(self.label_names):
            raise ValueError(f"{self.name}: {len(self.label_names)} label values wanted, got {len(key)}")
        return key


class Counter(_Metric):
    """Exposed as `<name>_total`, as prometheus_client names counters."""

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[Labels, float] = {}

    def inc(self, labels: Sequence[str] = (), amount: float = 1.0) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def remove(self, labels: Sequence[str]) -> None:
        """Drop one series (KeyError if it is not there)."""
        with self._lock:
            del self._values[self._key(labels)]

    def render(self) -> list[str]:
        with self._lock:
            values = sorted(self._values.items())
        lines = header(f"{self.name}_total", self.help, "counter")
        lines += [series(f"{self.name}_total", self.label_names, key, value) for key, value in values]
        return lines


class Gauge(_Metric):
    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[Labels, float] = {}

    def set(self, value: float, labels: Sequence[str] = ()) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = value

    def render(self) -> list[str]:
        with self._lock:
            values = sorted(self._values.items())
        lines = header(self.name, self.help, "gauge")
        return lines + [series(self.name, self.label_names, key, value) for key, value in values]


class Histogram(_Metric):
    def __init__(
        self, name: str, help_text: str, buckets: Sequence[float], label_names: Sequence[str] = ()
    ) -> None:
        super().__init__(name, help_text, label_names)
        self.bounds = (*sorted(float(b) for b in buckets), math.inf)
        self._counts: dict[Labels, list[int]] = {}  # per bucket, not cumulative
        self._sums: dict[Labels, float] = {}

    def observe(self, seconds: float, labels: Sequence[str] = ()) -> None:
        key = self._key(labels)
        index = next(i for i, bound in enumerate(self.bounds) if seconds <= bound)
        with self._lock:
            counts = self._counts.setdefault(key, [0] * len(self.bounds))
            counts[index] += 1
            self._sums[key] = self._sums.get(key, 0.0) + seconds

    def render(self) -> list[str]:
        with self._lock:
            rows = sorted((key, list(counts), self._sums[key]) for key, counts in self._counts.items())
        names = ("le", *self.label_names)
        lines = header(self.name, self.help, "histogram")
        for key, counts, total in rows:
            cumulative = 0
            for bound, count in zip(self.bounds, counts, strict=True):
                cumulative += count
                lines.append(series(f"{self.name}_bucket", names, (_number(bound), *key), cumulative))
            lines.append(series(f"{self.name}_count", self.label_names, key, cumulative))
            lines.append(series(f"{self.name}_sum", self.label_names, key, total))
        return lines
