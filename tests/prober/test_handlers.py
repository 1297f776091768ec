"""The probe handlers against real servers on loopback: HTTP (codes, headers, redirects), TCP, gRPC's
standard health service, and exec (environment, exit code, timeout; in a pod cgroup: tests/agent_cluster)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any, ClassVar

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agent.container.downwardapi import HostInfo
from agent.kuberuntime.execsync import exec_in_container
from agent.prober.handlers import (
    USER_AGENT,
    Outcome,
    ProbeError,
    Result,
    grpc_probe,
    http_probe,
    resolve_port,
    tcp_probe,
)
from agent.prober.spec import ContainerPort
from kubenode.model import Container, EnvVar, Pod


class Handler(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        Handler.seen.append({k.lower(): v for k, v in self.headers.items()})
        if self.path.startswith("/code/"):
            self.send_response(int(self.path.rsplit("/", 1)[1]))
        elif self.path == "/local-redirect":
            self.send_response(302)
            self.send_header("Location", "/code/500")
        elif self.path == "/far-redirect":
            self.send_response(302)
            self.send_header("Location", "http://example.invalid/")
        else:
            self.send_response(200)
        self.end_headers()
        self.wfile.write(b"body")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def web() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def get(port: int, path: str, headers: list[dict[str, str]] | None = None) -> Outcome:
    return http_probe({"path": path, "httpHeaders": headers or []}, "127.0.0.1", port, 2)


def test_http_codes(web: int) -> None:
    assert get(web, "/code/200").result == Result.SUCCESS
    assert get(web, "/code/399").result == Result.SUCCESS
    assert get(web, "/code/404") == Outcome(Result.FAILURE, "HTTP probe failed with statuscode: 404")


def test_http_headers(web: int) -> None:
    Handler.seen.clear()
    get(web, "/", [{"name": "X-Probe", "value": "1"}, {"name": "Host", "value": "app.example"}])
    seen = Handler.seen[-1]
    assert seen["user-agent"] == USER_AGENT and seen["accept"] == "*/*"
    assert seen["x-probe"] == "1" and seen["host"] == "app.example"
    get(web, "/", [{"name": "user-agent", "value": "mine"}])
    assert Handler.seen[-1]["user-agent"] == "mine"


def test_http_redirects(web: int) -> None:
    # Followed on the same host (to a 500 here), not to another host: success with a warning.
    assert get(web, "/local-redirect").output == "HTTP probe failed with statuscode: 500"
    far = get(web, "/far-redirect")
    assert far == Outcome(Result.WARNING, "Probe terminated redirects, Response body: body")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_and_tcp_to_a_closed_port() -> None:
    port = closed_port()
    outcome = http_probe({}, "127.0.0.1", port, 1)
    refused = f"dial tcp 127.0.0.1:{port}: connect: connection refused"
    assert outcome == Outcome(Result.FAILURE, f'Get "http://127.0.0.1:{port}/": {refused}')
    assert tcp_probe("127.0.0.1", port, 1) == Outcome(
        Result.FAILURE, f"dial tcp 127.0.0.1:{port}: connect: connection refused"
    )


def test_tcp_open(web: int) -> None:
    assert tcp_probe("127.0.0.1", web, 1).result == Result.SUCCESS


def test_ports_by_name_and_number() -> None:
    ports = (ContainerPort("http", 8080),)
    assert resolve_port("http", ports, "app") == 8080
    assert resolve_port(81, ports, "app") == 81
    assert resolve_port("82", ports, "app") == 82
    with pytest.raises(ProbeError, match="port 'metrics' not found in the ports of container app"):
        resolve_port("metrics", ports, "app")
    with pytest.raises(ProbeError, match="invalid port number"):
        resolve_port(70000, ports, "app")


def test_grpc_health() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        servicer.set("db", health_pb2.HealthCheckResponse.NOT_SERVING)
        assert grpc_probe("127.0.0.1", port, "", 2).result == Result.SUCCESS
        assert grpc_probe("127.0.0.1", port, "db", 2) == Outcome(
            Result.FAILURE, 'service unhealthy (responded with "NOT_SERVING")'
        )
        unknown = grpc_probe("127.0.0.1", port, "nope", 2)
        assert unknown.result == Result.FAILURE and "health rpc probe failed" in unknown.output
    finally:
        server.stop(0)
    assert grpc_probe("127.0.0.1", closed_port(), "", 1).result == Result.FAILURE


def test_exec_with_the_containers_env_and_a_timeout() -> None:
    container = Container("app", env=(EnvVar("GREETING", "hello"),))
    pod = Pod("web", uid="u", containers=(container,))
    host = HostInfo("node-a")
    command = ["sh", "-c", "echo $GREETING $HOSTNAME; exit 3"]
    said = exec_in_container(pod, container, command, [], host, timeout=5)
    assert (said.exit_code, said.output, said.timed_out) == (3, b"hello web\n", False)
    slow = exec_in_container(pod, container, ["sleep", "30"], [], host, timeout=0.2)
    assert slow.timed_out and slow.exit_code == 128 + 9
