"""The unary verbs' transport against a scripted HTTP/1.1 server on a real socket: the framings
kube-apiserver and proxies use (Content-Length, chunked, close-delimited), keep-alive reuse,
`Connection: close`, a connection the server dropped while idle, a broken answer, and a bound on the
connections in use (requests beyond it wait their turn, or fail once their timeout passes), and a bound on
the connections being opened at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from kubenode.kubeclient import KubeClient, TransportError
from kubenode.kubeclient.config import ClientConfig
from kubenode.kubeclient.transport import MAX_DIALS

Answer = Callable[[bytes], tuple[bytes, bool]]  # request head -> (raw answer, close afterwards)


class ScriptedServer:
    """Answers each request on each connection with `answer`; counts the connections accepted."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.accepted = 0
        self.requests: list[bytes] = []
        self.connections: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with conn, reader:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = reader.read(length)
                self.requests.append(head + body)
                raw, close = self.answer(head)
                conn.sendall(raw)
                if close:
                    return

    def drop_idle_connections(self) -> None:
        for conn in self.connections:
            conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()
        for conn in self.connections:
            conn.close()


@contextmanager
def serve(answer: Answer, max_connections: int | None = None) -> Iterator[tuple[ScriptedServer, KubeClient]]:
    server = ScriptedServer(answer)
    config = ClientConfig(host=f"http://127.0.0.1:{server.port}")
    client = KubeClient(config, timeout=10, max_connections=max_connections)
    try:
        yield server, client
    finally:
        client.close()
        server.close()


def json_answer(extra: bytes = b"") -> bytes:
    return b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%bContent-Length: 8\r\n\r\n{"a": 1}' % extra


@pytest.fixture
def keepalive() -> Iterator[tuple[ScriptedServer, KubeClient]]:
    with serve(lambda head: (json_answer(), False)) as pair:
        yield pair


def test_connections_are_kept_alive_and_requests_are_well_formed(
    keepalive: tuple[ScriptedServer, KubeClient],
) -> None:
    server, client = keepalive
    for _ in range(3):
        assert client.request("POST", "/api/v1/x", query={"dryRun": "All"}, body={"b": 2}) == {"a": 1}
    assert server.accepted == 1
    assert server.requests[0] == (
        b"POST /api/v1/x?dryRun=All HTTP/1.1\r\n"
        b"Host: 127.0.0.1:%d\r\n"
        b"Accept: application/json\r\n"
        b"User-Agent: kubenode\r\n"
        b"Content-Type: application/json\r\n"
        b"Content-Length: 7\r\n"
        b'\r\n{"b":2}' % server.port
    )


def test_a_connection_the_server_dropped_while_idle_is_not_reused(
    keepalive: tuple[ScriptedServer, KubeClient],
) -> None:
    server, client = keepalive
    assert client.request("GET", "/a") == {"a": 1}
    server.drop_idle_connections()
    assert client.request("GET", "/b") == {"a": 1}
    assert server.accepted == 2


def test_chunked_and_close_delimited_bodies_and_connection_close() -> None:
    answers = iter(
        [
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b'3\r\n{"a\r\n5;x=y\r\n": 1}\r\n0\r\n\r\n',
                False,
            ),
            (json_answer(b"Connection: close\r\n"), True),
            (b'HTTP/1.0 200 OK\r\n\r\n{"c": 3}', True),
            (b"HTTP/1.1 204 No Content\r\n\r\n", False),
        ]
    )
    with serve(lambda head: next(answers)) as (server, client):
        assert client.request("GET", "/chunked") == {"a": 1}
        assert client.request("GET", "/close") == {"a": 1}
        assert client.request("GET", "/eof") == {"c": 3}
        assert client.request("DELETE", "/nothing") == {}
        assert server.accepted == 3  # reused after the chunked answer, not after either close


def test_a_broken_answer_is_a_transport_error() -> None:
    bad = pytest.raises(TransportError, match=r"GET /x: bad status line")
    with serve(lambda head: (b"SPDY/3 200 OK\r\n\r\n", True)) as (_, client), bad:
        client.request("GET", "/x")
    short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"
    cut = pytest.raises(TransportError, match=r"GET /y: the connection ended after 2 of 10 body bytes")
    with serve(lambda head: (short, True)) as (_, client), cut:
        client.request("GET", "/y")


def held_answers() -> tuple[Answer, threading.Semaphore, threading.Event]:
    """An answer that waits for `release`; `arrived` is released once per request that reached it."""
    arrived, release = threading.Semaphore(0), threading.Event()

    def answer(head: bytes) -> tuple[bytes, bool]:
        arrived.release()
        release.wait(30)
        return json_answer(), False

    return answer, arrived, release


def test_requests_beyond_max_connections_wait_for_a_turn_on_the_same_connections() -> None:
    answer, arrived, release = held_answers()
    with serve(answer, max_connections=2) as (server, client):
        started = threading.Barrier(7)
        results: list[object] = []

        def call(i: int) -> None:
            started.wait(10)
            results.append(client.request("GET", f"/n{i}"))

        threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        started.wait(10)
        assert arrived.acquire(timeout=10) and arrived.acquire(timeout=10)  # two on the wire, held
        release.set()
        for thread in threads:
            thread.join(30)
        assert results == [{"a": 1}] * 6
        assert server.accepted == 2


def test_a_request_that_gets_no_turn_within_its_timeout_is_a_transport_error() -> None:
    answer, arrived, release = held_answers()
    with serve(answer, max_connections=1) as (_, client):
        first: list[object] = []
        holder = threading.Thread(target=lambda: first.append(client.request("GET", "/held")))
        holder.start()
        assert arrived.acquire(timeout=10)
        with pytest.raises(TransportError, match=r"GET /late: no connection free within 0.2 s"):
            client.request("GET", "/late", timeout=0.2)
        release.set()
        holder.join(30)
        assert first == [{"a": 1}]


def test_at_most_max_dials_connections_are_opened_at_once_and_the_others_wait() -> None:
    """A burst that finds no idle connection opens MAX_DIALS at a time (each is a TLS handshake on the
    server); the other requests wait for one of those, then all are answered."""
    with serve(lambda head: (json_answer(), False)) as (server, client):
        transport = client._transport
        dials_arrived, let_dials_finish = threading.Semaphore(0), threading.Event()
        dialing_now, most_at_once = [0], [0]
        real_open = transport.open_socket
        lock = threading.Lock()

        def slow_open(timeout: float, *, handshake: bool = True) -> socket.socket:
            with lock:
                dialing_now[0] += 1
                most_at_once[0] = max(most_at_once[0], dialing_now[0])
            dials_arrived.release()
            let_dials_finish.wait(30)
            try:
                return real_open(timeout, handshake=handshake)
            finally:
                with lock:
                    dialing_now[0] -= 1

        transport.open_socket = slow_open  # type: ignore[method-assign]
        results: list[object] = []
        threads = [
            threading.Thread(target=lambda i=i: results.append(client.request("GET", f"/b{i}")))
            for i in range(6)
        ]
        for thread in threads:
            thread.start()
        assert dials_arrived.acquire(timeout=10) and dials_arrived.acquire(timeout=10)
        deadline = time.monotonic() + 10
        while transport.waiting_for_dial < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # the other four reach the wait (a state, polled)
        assert transport.waiting_for_dial == 4
        let_dials_finish.set()
        for thread in threads:
            thread.join(30)
        assert results == [{"a": 1}] * 6
        assert most_at_once[0] == MAX_DIALS
        assert server.accepted <= 6
