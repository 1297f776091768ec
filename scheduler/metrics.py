"""kube-scheduler's metrics, and the HTTP endpoint that serves them with /healthz.

Names, labels and buckets follow `pkg/scheduler/metrics/metrics.go`:
- scheduler_schedule_attempts_total{result,profile}: one per scheduling attempt
  (result scheduled | unschedulable | error);
- scheduler_scheduling_attempt_duration_seconds{result,profile}: the attempt's duration;
- scheduler_pending_pods{queue}: pods in activeQ, backoffQ and the unschedulable set,
  read from the queue when scraped;
- scheduler_pod_scheduling_sli_duration_seconds{attempts}: from the pod entering the
  queue to its binding, over all its attempts;
- scheduler_preemption_attempts_total and scheduler_preemption_victims.

Each scheduler gets its own registry, so several can live in one process (tests).
/healthz (and /livez) answer 200 "ok" while every registered check passes, else 500 naming
the failing check, as kube's healthz does (leader election registers one); /readyz also
waits for the informers' first sync.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kubenode import metricshttp
from kubenode.metricshttp import parse_bind_address as parse_bind_address  # the CLI's import

# ExponentialBuckets(0.001, 2, 15): 1 ms .. ~16 s (attempt duration).
ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))
# ExponentialBuckets(0.01, 2, 20): 10 ms .. ~87 min (SLI duration).
SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))
# kube caps the attempts label at 15 ("15+" is not used; it clamps the value).
MAX_ATTEMPTS_LABEL = 15


class _PendingPods:
    """A collector that reads the queue sizes at scrape time."""

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            labels=["queue"],
        )
        counts = self._counts()
        for queue in ("active", "backoff", "unschedulable", "gated"):
            family.add_metric([queue], counts.get(queue, 0))
        yield family


class SchedulerMetrics:
    def __init__(self, pending_counts: Callable[[], dict[str, int]] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=self.registry,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=self.registry,
        )
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=self.registry,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            registry=self.registry,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=tuple(float(2**i) for i in range(7)),
            registry=self.registry,
        )
        if pending_counts is not None:
            self.registry.register(_PendingPods(pending_counts))
        # labels() validates and takes a lock on every call: each label set's children are looked
        # up once (two observations per bound pod).
        self._attempt_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._sli_children: dict[int, Any] = {}

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        key = (result, profile)
        children = self._attempt_children.get(key)
        if children is None:
            children = (
                self.schedule_attempts.labels(result, profile),
                self.attempt_duration.labels(result, profile),
            )
            self._attempt_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def scheduled(self, attempts: int, seconds: float) -> None:
        label = min(attempts, MAX_ATTEMPTS_LABEL)
        child = self._sli_children.get(label)
        if child is None:
            child = self._sli_children[label] = self.sli_duration.labels(str(label))
        child.observe(seconds)

    def preempted(self, victims: int) -> None:
        self.preemption_attempts.inc()
        self.preemption_victims.observe(victims)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsServer(metricshttp.MetricsServer):
    """GET /metrics (Prometheus text) and /healthz, /livez, /readyz on one listener."""

    def __init__(self, metrics: SchedulerMetrics, host: str, port: int) -> None:
        super().__init__(metrics.exposition, host, port, content_type=CONTENT_TYPE_LATEST)
