"""The server's own HTTP/1.1 path (handlers/fasthttp.py) over a raw TLS socket: pipelined requests are
answered in order, across the hand-over to aiohttp too; bodies and heads split over many writes, chunked
bodies, `Connection: close`, oversized and malformed requests are each answered as before."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from apiserver.handlers.fasthttp import parse_head
from harness.apiserver import ApiServerProcess

CM_PATH = "/api/v1/namespaces/default/configmaps"


class Reader:
    """HTTP/1.1 responses read off one socket, one at a time."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.file = sock.makefile("rb")

    def response(self) -> tuple[int, dict[str, str], bytes]:
        status_line = self.file.readline()
        assert status_line.startswith(b"HTTP/1."), status_line  # aiohttp answers a malformed head in 1.0
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := self.file.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = self.file.read(int(headers["content-length"]))
        else:
            assert headers.get("transfer-encoding") == "chunked", headers
            body = b""
            while (size := int(self.file.readline().strip(), 16)) > 0:
                body += self.file.read(size)
                self.file.readline()
            self.file.readline()
        return status, headers, body


@pytest.fixture
def conn(api: ApiServerProcess) -> Iterator[tuple[ssl.SSLSocket, Reader]]:
    raw = socket.create_connection(("127.0.0.1", api.port), timeout=30)
    sock = api.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
    with sock:
        yield sock, Reader(sock)


def request(api: ApiServerProcess, method: str, path: str, body: Any = None, extra: str = "") -> bytes:
    data = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {api.token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{extra}\r\n"
    )
    return head.encode() + data


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


def test_pipelined_requests_are_answered_in_order_across_the_hand_over(
    api: ApiServerProcess, conn: tuple[ssl.SSLSocket, Reader]
) -> None:
    sock, reader = conn
    sock.sendall(
        request(api, "POST", CM_PATH, configmap("pipe-a"))
        + request(api, "GET", CM_PATH + "/pipe-a")
        + request(api, "GET", "/healthz")  # not a resource verb: aiohttp serves the connection from here
        + request(api, "POST", CM_PATH, configmap("pipe-b"))
        + request(api, "GET", CM_PATH + "/pipe-b")
    )
    status, _, body = reader.response()
    assert status == 201 and json.loads(body)["metadata"]["name"] == "pipe-a"
    status, _, body = reader.response()
    assert status == 200 and json.loads(body)["data"] == {"k": "pipe-a"}
    status, _, body = reader.response()
    assert (status, body) == (200, b"ok")
    status, _, body = reader.response()
    assert status == 201 and json.loads(body)["metadata"]["name"] == "pipe-b"
    status, _, body = reader.response()
    assert status == 200 and json.loads(body)["data"] == {"k": "pipe-b"}


def test_a_request_split_into_single_bytes_is_answered(
    api: ApiServerProcess, conn: tuple[ssl.SSLSocket, Reader]
) -> None:
    sock, reader = conn
    for byte in request(api, "POST", CM_PATH, configmap("split-a")):
        sock.sendall(bytes([byte]))
    status, headers, body = reader.response()
    assert status == 201 and json.loads(body)["data"] == {"k": "split-a"}
    assert headers["content-type"] == "application/json"
    sock.sendall(request(api, "GET", CM_PATH + "/split-a"))  # the connection stays usable
    assert reader.response()[0] == 200


def test_chunked_body_after_a_fast_request_is_read_by_aiohttp(
    api: ApiServerProcess, conn: tuple[ssl.SSLSocket, Reader]
) -> None:
    sock, reader = conn
    data = json.dumps(configmap("chunked-a")).encode()
    chunked = (
        f"POST {CM_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {api.token}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
    sock.sendall(request(api, "GET", CM_PATH) + chunked)
    assert reader.response()[0] == 200
    status, _, body = reader.response()
    assert status == 201 and json.loads(body)["metadata"]["name"] == "chunked-a"


def test_connection_close_is_answered_then_closed(
    api: ApiServerProcess, conn: tuple[ssl.SSLSocket, Reader]
) -> None:
    sock, reader = conn
    sock.sendall(request(api, "GET", CM_PATH, extra="Connection: close\r\n"))
    status, headers, _ = reader.response()
    assert status == 200 and headers["connection"].lower() == "close"
    assert reader.file.read() == b""


def test_errors_are_statuses_on_the_fast_path(
    api: ApiServerProcess, conn: tuple[ssl.SSLSocket, Reader]
) -> None:
    sock, reader = conn
    sock.sendall(
        request(api, "GET", CM_PATH + "/no-such-map")
        + request(api, "POST", CM_PATH, {"kind": "ConfigMap"})  # no name
        + b"GET "
        + CM_PATH.encode()
        + b" HTTP/1.1\r\nHost: x\r\n\r\n"  # no token
    )
    status, _, body = reader.response()
    assert status == 404 and json.loads(body)["reason"] == "NotFound"
    status, _, body = reader.response()
    assert status == 422 and json.loads(body)["reason"] == "Invalid"
    status, _, body = reader.response()
    assert status == 401 and json.loads(body)["kind"] == "Status"


def test_a_newline_in_a_warning_becomes_a_space(
    api: ApiServerProcess, conn: tuple[ssl.SSLSocket, Reader]
) -> None:
    """As Go's net/http writes a header value holding CR or LF; the next header is not split off."""
    sock, reader = conn
    body = {**configmap("warn-newline"), "odd\nfield": 1}
    sock.sendall(request(api, "POST", CM_PATH + "?fieldValidation=Warn", body) + request(api, "GET", CM_PATH))
    status, headers, _ = reader.response()
    assert status == 201 and 'unknown field \\"odd field\\"' in headers["warning"], headers
    assert reader.response()[0] == 200


def _too_big(api: ApiServerProcess) -> bytes:
    return (
        f"POST {CM_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {api.token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {4 * 1024 * 1024}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize(
    ("refused", "code", "reason"),
    [
        (_too_big, 413, "RequestEntityTooLarge"),
        (lambda api: b"GET /api/v1/pods HTTP/1.1\r\nBad Header\r\n\r\n", 400, "BadRequest"),
    ],
)
def test_oversized_and_malformed_requests_get_aiohttps_statuses(
    api: ApiServerProcess,
    conn: tuple[ssl.SSLSocket, Reader],
    refused: Callable[[ApiServerProcess], bytes],
    code: int,
    reason: str,
) -> None:
    sock, reader = conn
    sock.sendall(request(api, "GET", CM_PATH) + refused(api))
    assert reader.response()[0] == 200
    status, _, body = reader.response()
    assert status == code and json.loads(body)["reason"] == reason


@pytest.mark.parametrize(
    ("head", "fast"),
    [
        (b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nContent-Length: 2", True),
        (b"POST /api/v1/namespaces/default/pods/p/binding HTTP/1.1\r\nContent-Length: 2", True),
        (b"POST /apis/events.k8s.io/v1/namespaces/default/events HTTP/1.1\r\nHost: x", True),
        (b"GET /api/v1/pods?watch=1 HTTP/1.1\r\nHost: x", False),
        (b"GET /api/v1/namespaces/default/pods/p/log HTTP/1.1\r\nHost: x", False),
        (b"POST /api/v1/namespaces/default/pods/p/exec HTTP/1.1\r\nHost: x", False),
        (b"GET /healthz HTTP/1.1\r\nHost: x", False),
        (b"GET /api/v1 HTTP/1.1\r\nHost: x", False),
        (b"GET /api/v1/pods HTTP/1.0\r\nHost: x", False),
        (b"HEAD /api/v1/pods HTTP/1.1\r\nHost: x", False),
        (b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nTransfer-Encoding: chunked", False),
        (b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2", False),
        (b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nExpect: 100-continue", False),
        (b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nContent-Encoding: gzip", False),
        (b"GET /api/v1/pods HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket", False),
        (b"GET /api/v1/namespaces/a%2Fb/pods HTTP/1.1\r\nHost: x", False),
        (b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\n folded", False),
        (b"GET /api/v1/pods HTTP/1.1\nHost: x", False),
        (b"POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews HTTP/1.1\r\nHost: x", False),
    ],
)
def test_which_heads_the_fast_path_takes(head: bytes, fast: bool) -> None:
    assert (parse_head(head, frozenset({"authorization.k8s.io"})) is not None) == fast


def test_groups_with_routes_of_their_own_stay_with_aiohttp() -> None:
    from aiohttp import web

    from apiserver.handlers.fasthttp import own_route_groups

    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_get("/api/v1", handler)
    app.router.add_post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", handler)
    app.router.add_get("/apis/metrics.k8s.io/v1beta1/{tail:.+}", handler)
    app.router.add_route("*", "/api/v1/{tail:.+}", handler)
    app.router.add_route("*", "/apis/{group}/{version}/{tail:.+}", handler)
    assert own_route_groups(app) == {"authorization.k8s.io", "metrics.k8s.io"}


@pytest.mark.parametrize(
    "query",
    ["a=1&b=2", "a&b=", "&&a=1&&", "fieldManager=k&fieldValidation=Strict", "a=1=2", "=x", "a=%20b+c", "x=="],
)
def test_queries_split_as_parse_qsl_does(query: str) -> None:
    from urllib.parse import parse_qsl

    from apiserver.handlers.fasthttp import _query_pairs

    assert _query_pairs(query) == parse_qsl(query, keep_blank_values=True)
