"""One small HTTP listener for a daemon's `/metrics` and health: GET /metrics, /healthz, /livez, /readyz.

Flow: a daemon builds `MetricsServer(exposition, host, port)` with a callable that renders its
Prometheus text, registers named checks (`checks`: liveness, also part of readiness;
`ready_checks`: /readyz only), and starts it on a daemon thread. /healthz and /livez answer
200 "ok" while every check returns None, else 500 with one `[-]<name> failed: <why>` line per
failing check, as kube's healthz does; /readyz adds the ready checks. Plain HTTP on purpose:
it carries no secrets and Prometheus and kubelet probes scrape it in-cluster. The scheduler
and the device plugin use it; it imports no metrics library (the caller renders the text).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Prometheus text format 0.0.4, which every scraper reads.
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


class MetricsServer:
    """GET /metrics (Prometheus text) and /healthz, /livez, /readyz on one listener."""

    def __init__(
        self, exposition: Callable[[], bytes], host: str, port: int, *, content_type: str = TEXT_FORMAT
    ) -> None:
        self.checks: dict[str, Callable[[], str | None]] = {}  # name -> None if fine, else why not
        self.ready_checks: dict[str, Callable[[], str | None]] = {}  # /readyz only
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, exposition(), content_type)
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
    """host:port (port 0 picks a free one; an empty host means every address); ValueError names the flag."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics-bind-address: expected host:port, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)
