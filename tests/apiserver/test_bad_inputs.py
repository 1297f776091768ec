"""Bad inputs a client can send, each answered with a kube `Status` as kube-apiserver answers (issue 26).

The table in docs/apiserver.md ("Bad inputs") lists each case beside kube-apiserver's answer.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest

from apiserver.handlers.httperrors import MAX_FIELD, MAX_HEADERS, MAX_LINE
from harness.apiserver import REPO, ApiServerProcess

PODS = "/api/v1/namespaces/default/pods"


def raw_exchange(api: ApiServerProcess, request: bytes) -> tuple[int, dict[str, str], Any]:
    """Send bytes over TLS as they are; (status, headers, decoded JSON body) of the answer."""
    with (
        socket.create_connection(("127.0.0.1", api.port), timeout=30) as plain,
        api.ssl_context().wrap_socket(plain, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(request)
        chunks = []
        while chunk := tls.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(body)


def get(path: str, api: ApiServerProcess, extra: str = "") -> bytes:
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {api.token}\r\n{extra}"
        "Connection: close\r\n\r\n"
    ).encode()


def test_negative_and_zero_limits_list_everything(api: ApiServerProcess) -> None:
    for name in ("l1", "l2"):
        api.request(
            "POST", PODS, {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
        )
    for limit in ("-1", "0", "-9999"):
        status, body = api.request("GET", f"{PODS}?limit={limit}")
        assert status == 200 and len(body["items"]) == 2 and "continue" not in body["metadata"]
    status, body = api.request("GET", f"{PODS}?limit=x")
    assert status == 400 and body["kind"] == "Status"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("abc", "invalid syntax"),
        ("-1", "invalid syntax"),
        ("1e3", "invalid syntax"),
        ("9" * 25, "value out of range"),
    ],
)
@pytest.mark.parametrize("path", [PODS, PODS + "/l1", "/api/v1/pods?watch=1"])
def test_a_non_numeric_resource_version_is_400(
    api: ApiServerProcess, path: str, value: str, problem: str
) -> None:
    joiner = "&" if "?" in path else "?"
    status, body = api.request("GET", f"{path}{joiner}resourceVersion={value}")
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == (
        f'invalid resource version: resourceVersion: Invalid value: "{value}": '
        f'strconv.ParseUint: parsing "{value}": {problem}'
    )


def test_a_request_line_over_the_limit_gets_a_414_status(api: ApiServerProcess) -> None:
    status, headers, body = raw_exchange(api, get(PODS + "?labelSelector=" + "a" * MAX_LINE, api))
    assert status == 414 and headers["content-type"].startswith("application/json")
    assert body["kind"] == "Status" and body["code"] == 414 and body["status"] == "Failure"
    assert "a" * 100 not in json.dumps(body)  # the offending text is not echoed
    status, _, body = raw_exchange(api, get(PODS + "?unused=" + "a" * (MAX_LINE - 200), api))
    assert status == 200 and body["kind"] == "PodList"  # under the limit: served


def test_headers_over_the_limit_get_a_431_status(api: ApiServerProcess) -> None:
    status, _, body = raw_exchange(api, get(PODS, api, f"X-Big: {'b' * (MAX_FIELD + 10)}\r\n"))
    assert status == 431 and body["kind"] == "Status" and body["code"] == 431
    many = "".join(f"X-H{i}: v\r\n" for i in range(MAX_HEADERS + 1))
    status, _, body = raw_exchange(api, get(PODS, api, many))
    assert status == 431 and body["reason"] == "RequestHeaderFieldsTooLarge"


@pytest.mark.parametrize(
    "request_bytes",
    [b"NOT HTTP AT ALL\r\n\r\n", b"GET / HTTP/1.1\r\nBad Header Line\r\n\r\n", b"GET /\x00 HTTP/1.1\r\n\r\n"],
)
def test_malformed_http_gets_a_400_status(api: ApiServerProcess, request_bytes: bytes) -> None:
    status, _, body = raw_exchange(api, request_bytes)
    assert status == 400 and body["kind"] == "Status" and body["reason"] == "BadRequest"
    assert api.request("GET", "/readyz")[0] == 200  # and the server keeps serving


def test_a_body_that_cannot_be_decoded_gets_a_400_status(api: ApiServerProcess) -> None:
    body = b"not gzip at all"
    request = (
        f"POST {PODS} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {api.token}\r\n"
        f"Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body
    status, _, reply = raw_exchange(api, request)
    assert status == 400 and reply["reason"] == "BadRequest" and "content-encoding" in reply["message"]


def test_help_says_tls_on_every_address() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "apiserver", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    text = " ".join(result.stdout.split())
    assert "HTTPS on every address, loopback included" in text
    assert "unless loopback" not in text


def test_bad_field_validation_and_propagation_policy_get_kubes_422(api: ApiServerProcess) -> None:
    status, body = api.request("POST", PODS + "?fieldValidation=Loose", {"metadata": {"name": "fv"}})
    assert status == 422 and body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )
    status, body = api.request("DELETE", PODS + "/l1?propagationPolicy=Later")
    assert status == 422 and body["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Later": '
        'supported values: "Foreground", "Background", "Orphan", "nil"'
    )
