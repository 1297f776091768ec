"""The agent's local HTTP endpoint: `/healthz` and `/pods` (the pods with their status, as JSON)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StatusServer:
    def __init__(self, host: str, port: int, pods: Callable[[], dict[str, Any]]) -> None:
        handler = _handler(pods)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="status-http", daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def _handler(pods: Callable[[], dict[str, Any]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/healthz":
                self._send(200, "text/plain", b"ok")
            elif path == "/pods":
                self._send(200, "application/json", json.dumps(pods(), indent=1).encode())
            else:
                self._send(404, "text/plain", b"not found: try /pods or /healthz\n")

        def _send(self, code: int, content_type: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # requests are not worth a log line each

    return Handler
