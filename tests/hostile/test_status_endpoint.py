"""The status endpoint under a flood: idle connections cost no thread and cannot lock a probe out, `/pods` is
paged, `/healthz` turns unhealthy when an agent loop dies (issue 14 items 4 and 10)."""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.server.httpapi import MAX_PAGE_BYTES, MAX_PAGE_ITEMS, StatusServer
from harness.manifests import write_manifest
from tests.agent.support import Harness, pod_manifest, wait_until


@pytest.fixture
def serve() -> Iterator[Callable[..., StatusServer]]:
    servers: list[StatusServer] = []

    def start(pods: Callable[[], dict[str, Any]] = lambda: {"items": []}, **kwargs: Any) -> StatusServer:
        server = StatusServer("127.0.0.1", 0, pods, **kwargs)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def get(server: StatusServer, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://{server.address}{path}", timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_idle_connections_cost_no_thread_and_never_lock_out_a_probe(
    serve: Callable[..., StatusServer],
) -> None:
    # The idle connections keep their slots for a minute: a probe that had to wait for them to time out would
    # itself time out (30 s), while one served beside them answers at once, however loaded the machine is.
    server = serve(header_timeout=60.0)
    threads_before = threading.active_count()
    idle = [socket.create_connection(tuple(server.address.rsplit(":", 1)), timeout=5) for _ in range(300)]  # type: ignore[arg-type]
    try:
        assert get(server, "/healthz", timeout=30) == (200, b"ok")
        assert threading.active_count() <= threads_before + 3  # was one thread per connection
        assert server.open_connections <= 64
    finally:
        for sock in idle:
            sock.close()


def test_an_idle_connection_is_closed_once_its_request_head_is_overdue(
    serve: Callable[..., StatusServer],
) -> None:
    server = serve(header_timeout=1.0)
    with socket.create_connection(tuple(server.address.rsplit(":", 1)), timeout=30) as idle:  # type: ignore[arg-type]
        assert idle.recv(1) == b""


def test_pods_is_paged_and_bounded(serve: Callable[..., StatusServer]) -> None:
    filler = "x" * 10_000
    items = [{"metadata": {"name": f"pod-{i}"}, "blob": filler} for i in range(2000)]
    server = serve(lambda: {"kind": "PodList", "items": list(items), "errors": []})
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        code, body = get(server, f"/pods?continue={token}" if token else "/pods")
        assert code == 200
        assert len(body) <= MAX_PAGE_BYTES + 20_000
        page = json.loads(body)
        assert len(page["items"]) <= MAX_PAGE_ITEMS
        seen.extend(i["metadata"]["name"] for i in page["items"])
        pages += 1
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert seen == [f"pod-{i}" for i in range(2000)]
    assert pages >= 4
    code, body = get(server, "/pods?limit=3")
    assert len(json.loads(body)["items"]) == 3


def test_extra_routes_are_served(serve: Callable[..., StatusServer]) -> None:
    server = serve(extra_routes={"/metrics": lambda: (200, "text/plain; version=0.0.4", b"up 1\n")})
    assert get(server, "/metrics") == (200, b"up 1\n")
    assert get(server, "/nothing")[0] == 404


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the injected death
def test_healthz_is_unhealthy_while_an_agent_loop_is_dead(
    make_harness: Callable[..., Harness], manifests: Path, serve: Callable[..., StatusServer]
) -> None:
    write_manifest(manifests, "web.yaml", pod_manifest("web"))
    h = make_harness().start()
    h.wait_phase("web", "Running")
    server = serve(h.agent.status_json, health=h.agent.health_problems)
    assert get(server, "/healthz") == (200, b"ok")

    def die() -> None:
        raise SystemExit("injected: the loop thread ends")

    h.agent._tick = die  # type: ignore[method-assign]
    _code, body = wait_until(lambda: (r := get(server, "/healthz"))[0] == 500 and r, 5, "/healthz to fail")
    assert b"agent loop is not running" in body
