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

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

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

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        self.schedule_attempts.labels(result, profile).inc()
        self.attempt_duration.labels(result, profile).observe(seconds)

    def scheduled(self, attempts: int, seconds: float) -> None:
        self.sli_duration.labels(str(min(attempts, MAX_ATTEMPTS_LABEL))).observe(seconds)

    def preempted(self, victims: int) -> None:
        self.preemption_attempts.inc()
        self.preemption_victims.observe(victims)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class MetricsServer:
    """GET /metrics (Prometheus text) and /healthz, /livez, /readyz on one listener."""

    def __init__(self, metrics: SchedulerMetrics, host: str, port: int) -> None:
        self.checks: dict[str, Callable[[], str | None]] = {}  # name -> None if fine, else why not
        self.ready_checks: dict[str, Callable[[], str | None]] = {}  # /readyz only
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, metrics.exposition(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez", "/readyz"):
                    failures = server.failures(ready=path == "/readyz")
                    body = "ok" if not failures else "\n".join(f"[-]{f}" for f in failures)
                    self._reply(500 if failures else 200, body.encode(), "text/plain; charset=utf-8")
                else:
                    self._reply(404, b"404 page not found\n", "text/plain; charset=utf-8")

            def _reply(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # scrapes every few seconds would flood the log

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def failures(self, ready: bool = False) -> list[str]:
        found = []
        checks = {**self.checks, **(self.ready_checks if ready else {})}
        for name, check in checks.items():
            why = check()
            if why is not None:
                found.append(f"{name} failed: {why}")
        return found

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def parse_bind_address(text: str) -> tuple[str, int]:
    """host:port (port 0 picks a free one); raises ValueError naming the problem."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics-bind-address: expected host:port, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)
