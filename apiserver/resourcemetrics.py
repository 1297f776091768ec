"""Resource usage for metrics.k8s.io, computed from the nodes' `/metrics/resource`, as metrics-server does.

On a real cluster metrics-server scrapes every kubelet's /metrics/resource every 15 s and serves
metrics.k8s.io through API aggregation; `kubenode apiserver` has no aggregation layer, so it does the same job
itself, on demand. Flow: `ResourceMetrics.current()` -> if the last result is younger than FRESH_S it is
served again -> else every node with a daemon endpoint (kubenode/nodeproxyauth.py) is scraped at once
(`GET http://<node>/metrics/resource`, the same signed request as pods/log) -> the Prometheus text is parsed
(`parse_samples`) -> CPU is a rate, so each cumulative counter is compared with the node's previous scrape
(a node seen for the first time is scraped a second time after FIRST_WINDOW_S) -> per node: its CPU in
nanocores and working set bytes, and per pod the same for each container, with the window and timestamp of
the newer scrape. A node that cannot be scraped is left out (and logged), as metrics-server leaves it out.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

FRESH_S = 1.0  # a result this young is served again rather than scraping every node per request
FIRST_WINDOW_S = 1.0
SCRAPE_TIMEOUT_S = 5.0
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+(\d+))?\s*$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    value: float
    timestamp_ms: int | None


def parse_samples(text: str) -> dict[tuple[str, Labels], Sample]:
    """Prometheus text format: (metric name, sorted labels) -> value and timestamp; comments skipped."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels_text, value, timestamp = match.groups()
        labels = tuple(sorted((k, _unescape(v)) for k, v in _LABEL.findall(labels_text or "")))
        try:
            samples[(name, labels)] = Sample(float(value), int(timestamp) if timestamp else None)
        except ValueError:
            continue
    return samples


def _unescape(value: str) -> str:
    return value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


@dataclass(frozen=True)
class Usage:
    cpu_nanocores: int
    memory_bytes: int


@dataclass
class NodeUsage:
    node: str
    timestamp: float  # unix seconds of the newer scrape
    window: float  # seconds between the two scrapes the CPU rate comes from
    usage: Usage
    pods: dict[tuple[str, str], dict[str, Usage]] = field(default_factory=dict)  # (ns, pod) -> container


def _rate(now: Sample | None, before: Sample | None, fallback_window: float) -> int | None:
    if now is None or before is None or now.value < before.value:
        return None
    if now.timestamp_ms is not None and before.timestamp_ms is not None:
        window = (now.timestamp_ms - before.timestamp_ms) / 1000
    else:
        window = fallback_window
    if window <= 0:
        return None
    return int((now.value - before.value) / window * 1e9)


def node_usage(
    node: str,
    now: Mapping[tuple[str, Labels], Sample],
    before: Mapping[tuple[str, Labels], Sample],
    now_at: float,
    before_at: float,
) -> NodeUsage | None:
    """Usage from two scrapes of one node, or None when the node's own CPU cannot be rated."""
    cpu_key = ("node_cpu_usage_seconds_total", ())
    cpu = _rate(now.get(cpu_key), before.get(cpu_key), now_at - before_at)
    memory = now.get(("node_memory_working_set_bytes", ()))
    if cpu is None or memory is None:
        return None
    current, previous = now[cpu_key], before[cpu_key]
    window = now_at - before_at
    if current.timestamp_ms is not None and previous.timestamp_ms is not None:
        window = (current.timestamp_ms - previous.timestamp_ms) / 1000
    result = NodeUsage(node, now_at, window, Usage(cpu, int(memory.value)))
    for (name, labels), sample in now.items():
        if name != "container_cpu_usage_seconds_total":
            continue
        label = dict(labels)
        rate = _rate(sample, before.get((name, labels)), window)
        working_set = now.get(("container_memory_working_set_bytes", labels))
        if rate is None or working_set is None:
            continue  # a container new since the previous scrape: no rate yet (metrics-server skips it too)
        pod = (label.get("namespace", ""), label.get("pod", ""))
        result.pods.setdefault(pod, {})[label.get("container", "")] = Usage(rate, int(working_set.value))
    return result


Scrape = Callable[[str, str], Awaitable[str]]  # (node name, host:port) -> the /metrics/resource text


class ResourceMetrics:
    def __init__(self, scrape: Scrape, clock: Callable[[], float] = time.time) -> None:
        self._scrape = scrape
        self._clock = clock
        self._lock = asyncio.Lock()
        self._previous: dict[str, tuple[float, dict[tuple[str, Labels], Sample]]] = {}
        self._result: dict[str, NodeUsage] = {}
        self._result_at = 0.0
        self._asked: set[str] = set()  # the nodes the last result was scraped from (failed ones included)

    async def current(self, endpoints: Mapping[str, str]) -> dict[str, NodeUsage]:
        """Usage by node name for the nodes in `endpoints` (node name -> host:port)."""
        async with self._lock:
            if self._clock() - self._result_at < FRESH_S and set(endpoints) <= self._asked:
                return {n: u for n, u in self._result.items() if n in endpoints}
            scraped = await self._scrape_all(endpoints)
            first_time = [n for n in scraped if n not in self._previous]
            if first_time:
                for node in first_time:
                    self._previous[node] = scraped[node]
                await asyncio.sleep(FIRST_WINDOW_S)
                scraped.update(await self._scrape_all({n: endpoints[n] for n in first_time}))
            result = {}
            for node, (at, samples) in scraped.items():
                before_at, before = self._previous.get(node, (at, {}))
                usage = node_usage(node, samples, before, at, before_at)
                if usage is not None:
                    result[node] = usage
                self._previous[node] = (at, samples)
            for gone in set(self._previous) - set(endpoints):
                del self._previous[gone]
            self._result, self._result_at, self._asked = result, self._clock(), set(endpoints)
            return result

    async def _scrape_all(
        self, endpoints: Mapping[str, str]
    ) -> dict[str, tuple[float, dict[tuple[str, Labels], Sample]]]:
        names = sorted(endpoints)
        texts = await asyncio.gather(*(self._scrape(n, endpoints[n]) for n in names), return_exceptions=True)
        scraped = {}
        for node, text in zip(names, texts, strict=True):
            if isinstance(text, BaseException):
                log.warning("node %s: resource metrics: %s", node, text)
                continue
            scraped[node] = (self._clock(), parse_samples(text))
        return scraped
