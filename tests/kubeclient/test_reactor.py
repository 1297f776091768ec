"""`KubeClient.request_async` (the reactor) against the scripted HTTP/1.1 server of test_transport:
the same bytes on the wire as the blocking transport, every framing, keep-alive reuse and
`Connection: close`, a connection the server dropped while idle, a broken answer, the bound on
connections (the rest wait, requests sent `ahead` first), and a deadline that passes."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from kubenode.kubeclient import KubeClient, KubeError, NotFound, TransportError
from kubenode.kubeclient.config import ClientConfig
from tests.kubeclient.test_transport import Answer, ScriptedServer, held_answers, json_answer, serve

NOT_FOUND = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}'
Result = tuple[dict[str, Any] | None, KubeError | None]


class Calls:
    """Collects the answers of async requests, in the order their callbacks ran."""

    def __init__(self) -> None:
        self.results: list[tuple[str, Result]] = []
        self.done = threading.Condition()

    def send(self, client: KubeClient, method: str, path: str, **kwargs: Any) -> None:
        def done(answer: dict[str, Any] | None, error: KubeError | None) -> None:
            with self.done:
                self.results.append((path, (answer, error)))
                self.done.notify_all()

        client.request_async(method, path, done, **kwargs)

    def wait(self, count: int) -> list[tuple[str, Result]]:
        with self.done:
            assert self.done.wait_for(lambda: len(self.results) >= count, 30)
            return list(self.results)


def one(client: KubeClient, method: str, path: str, **kwargs: Any) -> Result:
    calls = Calls()
    calls.send(client, method, path, **kwargs)
    return calls.wait(1)[0][1]


def test_the_same_request_as_the_blocking_transport_on_a_kept_alive_connection() -> None:
    with serve(lambda head: (json_answer(), False)) as (server, client):
        for _ in range(3):
            answer = one(client, "POST", "/api/v1/x", query={"dryRun": "All"}, body={"b": 2})
            assert answer == ({"a": 1}, None)
        assert client.request("POST", "/api/v1/x", query={"dryRun": "All"}, body={"b": 2}) == {"a": 1}
        assert server.accepted == 2  # one for the reactor's three, one for the blocking request
        assert server.requests[0] == server.requests[3]
        assert one(client, "POST", "/y", body={}, decode=False) == ({}, None)


def test_every_framing_and_connection_close() -> None:
    answers = iter(
        [
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b'3\r\n{"a\r\n5;x=y\r\n": 1}\r\n0\r\nTrailer: t\r\n\r\n',
                False,
            ),
            (json_answer(b"Connection: close\r\n"), True),
            (b'HTTP/1.0 200 OK\r\n\r\n{"c": 3}', True),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", False),
            (
                b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%b" % (len(NOT_FOUND), NOT_FOUND),
                False,
            ),
        ]
    )
    with serve(lambda head: next(answers)) as (server, client):
        assert one(client, "GET", "/chunked") == ({"a": 1}, None)
        assert one(client, "GET", "/close") == ({"a": 1}, None)
        assert one(client, "GET", "/eof") == ({"c": 3}, None)
        assert one(client, "DELETE", "/nothing") == ({}, None)
        answer, error = one(client, "GET", "/missing")
        assert answer is None and isinstance(error, NotFound)
        assert server.accepted == 3  # reused after the chunked and 204 answers, not after either close


def test_a_connection_the_server_dropped_while_idle_is_not_reused() -> None:
    with serve(lambda head: (json_answer(), False)) as (server, client):
        assert one(client, "GET", "/a") == ({"a": 1}, None)
        server.drop_idle_connections()
        assert one(client, "GET", "/b") == ({"a": 1}, None)
        assert server.accepted == 2


def test_a_broken_answer_is_a_transport_error() -> None:
    with serve(lambda head: (b"SPDY/3 200 OK\r\n\r\n", True)) as (_, client):
        answer, error = one(client, "GET", "/x")
        assert answer is None and isinstance(error, TransportError)
        assert str(error).startswith("GET /x: bad status line")
    short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"
    with serve(lambda head: (short, True)) as (_, client):
        answer, error = one(client, "GET", "/y")
        assert isinstance(error, TransportError) and "closed the connection without a whole answer" in str(
            error
        )


def bounded(answer: Answer, connections: int) -> tuple[ScriptedServer, KubeClient]:
    server = ScriptedServer(answer)
    config = ClientConfig(host=f"http://127.0.0.1:{server.port}")
    return server, KubeClient(config, timeout=10, async_connections=connections)


def test_requests_beyond_the_bound_wait_and_those_sent_ahead_go_first() -> None:
    answer, arrived, release = held_answers()
    server, client = bounded(answer, 1)
    try:
        calls = Calls()
        for i in range(6):
            calls.send(client, "GET", f"/n{i}")
        assert arrived.acquire(timeout=10)  # one on the wire, held; five wait
        calls.send(client, "GET", "/ahead", ahead=True)
        release.set()
        results = calls.wait(7)
        assert [r for _, r in results] == [({"a": 1}, None)] * 7
        assert server.accepted == 1
        sent = [request.split(b" ", 2)[1] for request in server.requests]
        assert sent == [b"/n0", b"/ahead", b"/n1", b"/n2", b"/n3", b"/n4", b"/n5"]
    finally:
        client.close()
        server.close()


def test_a_request_past_its_deadline_is_a_transport_error_and_close_fails_the_rest() -> None:
    answer, arrived, release = held_answers()
    server, client = bounded(answer, 1)
    try:
        calls = Calls()
        calls.send(client, "GET", "/held", timeout=0.3)
        calls.send(client, "GET", "/queued", timeout=0.3)
        path, (_, error) = calls.wait(1)[0]
        assert path == "/held" and isinstance(error, TransportError)
        assert str(error) == "GET /held: no answer within 0.3 s"
        path, (_, error) = calls.wait(2)[1]
        assert path == "/queued" and isinstance(error, TransportError)
        held = Calls()
        held.send(client, "GET", "/at-close", timeout=30)
        assert arrived.acquire(timeout=10) and arrived.acquire(timeout=10)
        client.close()
        (_, (_, error)) = held.wait(1)[0]
        assert isinstance(error, TransportError) and "the client is closed" in str(error)
        _, error = one(client, "GET", "/after-close")
        assert isinstance(error, TransportError) and "the client is closed" in str(error)
    finally:
        release.set()
        client.close()
        server.close()


@pytest.mark.parametrize("connections", [1, 8])
def test_many_requests_all_answered_once(connections: int) -> None:
    server, client = bounded(lambda head: (json_answer(), False), connections)
    try:
        calls = Calls()
        for i in range(200):
            calls.send(client, "POST", f"/p{i}", body={"i": i}, ahead=i % 3 == 0)
        results = calls.wait(200)
        assert sorted(path for path, _ in results) == sorted(f"/p{i}" for i in range(200))
        assert all(result == ({"a": 1}, None) for _, result in results)
        assert server.accepted <= connections
    finally:
        client.close()
        server.close()


def test_a_request_sent_from_a_callback_is_not_stranded_when_nothing_else_is_in_flight() -> None:
    """A callback's request (a failed binding's FailedScheduling event, sent from the reactor's
    thread) goes out although nothing else is in flight and no wakeup comes. After an API server
    restart dropped the connections and then refused new ones, such a request waited for ever
    (and every later one behind it): here /first is dropped, /second refused, and /third, sent
    from /second's callback, must still be answered."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept_once_then_stop() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        listener.close()  # before the connection: once /first has failed, every connect is refused
        conn.close()

    server = threading.Thread(target=accept_once_then_stop, daemon=True)
    server.start()
    client = KubeClient(ClientConfig(host=f"http://127.0.0.1:{port}"), timeout=10)
    try:
        calls = Calls()

        def refused(_: dict[str, Any] | None, error: KubeError | None) -> None:
            calls.send(client, "GET", "/third")

        client.request_async("GET", "/first", lambda *_: client.request_async("GET", "/second", refused))
        path, (_, error) = calls.wait(1)[0]
        assert path == "/third" and isinstance(error, TransportError) and "refused" in str(error)
    finally:
        client.close()
        server.join(10)
