"""The four probe handlers, as the kubelet's pkg/probe runs them; each returns an `Outcome`.

- exec: the command runs in the container's place (agent/kuberuntime/execsync.py); exit 0 succeeds, any other
  code fails with the command's output; at timeoutSeconds it is killed and fails.
- httpGet: GET scheme://host:port/path (host defaults to the pod IP, which is the host's: process pods share
  its network; https is not verified, as the kubelet's); User-Agent `kube-probe/<version>` and Accept `*/*`
  unless the probe's headers say otherwise (a `Host` header sets the request's host). 200-399 succeeds,
  anything else fails with `HTTP probe failed with statuscode: N`. Redirects are followed (at most 10) while
  they stay on the same host name; one to another host is not followed and counts as success with the
  warning `Probe terminated redirects`, as the kubelet's non-local redirect rule does.
- tcpSocket: a TCP connect to host:port within the timeout.
- grpc: grpc.health.v1.Health/Check on 127.0.0.1:port (insecure, as the kubelet's) with the probe's
  `service`; SERVING succeeds, any other status fails.
A port given by name is looked up in the container's `ports`; a name the container does not declare raises
`ProbeError` naming it (the kubelet's "probe errored"), and so does a port out of range.
"""

from __future__ import annotations

import enum
import http.client
import socket
import ssl
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.container.execresult import ExecRunner
from agent.prober.spec import ContainerPort, ProbeSpec
from kubenode import __version__

MAX_BODY_BYTES = 10 * 1024  # the kubelet keeps 10 KiB of a response body
MAX_REDIRECTS = 10
USER_AGENT = "kube-probe/{}".format(".".join(__version__.split(".")[:2]))


class ProbeError(Exception):
    """The probe could not be run at all (the kubelet's 'probe errored'): its result is unknown."""


class Result(enum.StrEnum):
    SUCCESS = "success"
    WARNING = "warning"  # succeeded, with something worth an event (a redirect not followed)
    FAILURE = "failure"


@dataclass(frozen=True)
class Outcome:
    result: Result
    output: str = ""


def resolve_port(value: Any, ports: Sequence[ContainerPort], container: str) -> int:
    """A probe's port: a number, or the name of one of the container's ports (a numeric string counts)."""
    if isinstance(value, str):
        for port in ports:
            if port.name == value:
                return port.port
        if not value.isdigit():
            raise ProbeError(f"port {value!r} not found in the ports of container {container}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ProbeError(f"invalid port number: {value!r}")
    return value


def run_probe(spec: ProbeSpec, host_ip: str, run_exec: ExecRunner) -> Outcome:
    """Run the probe once; raises ProbeError when it cannot be run."""
    if spec.error:
        raise ProbeError(spec.error)
    action = spec.action
    if spec.handler == "exec":
        return exec_probe(action, spec.timeout, run_exec)
    if spec.handler == "httpGet":
        port = resolve_port(action.get("port"), spec.ports, spec.container)
        return http_probe(action, str(action.get("host") or host_ip), port, spec.timeout)
    if spec.handler == "tcpSocket":
        port = resolve_port(action.get("port"), spec.ports, spec.container)
        return tcp_probe(str(action.get("host") or host_ip), port, spec.timeout)
    grpc_port = action.get("port")
    if isinstance(grpc_port, bool) or not isinstance(grpc_port, int) or not 0 < grpc_port < 65536:
        raise ProbeError(f"grpc.port: must be a port number, got {grpc_port!r}")
    return grpc_probe(host_ip, grpc_port, str(action.get("service") or ""), spec.timeout)


def exec_probe(action: Mapping[str, Any], timeout: float, run_exec: ExecRunner) -> Outcome:
    command = action.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise ProbeError("exec.command: must be a non-empty list of strings")
    result = run_exec(command, timeout)
    output = result.output.decode("utf-8", "replace")
    if result.timed_out:
        return Outcome(Result.FAILURE, f"command {' '.join(command)!r} timed out")
    return Outcome(Result.SUCCESS if result.exit_code == 0 else Result.FAILURE, output)


def tcp_probe(host: str, port: int, timeout: float) -> Outcome:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return Outcome(Result.SUCCESS)
    except TimeoutError:
        return Outcome(Result.FAILURE, f"dial tcp {_join(host, port)}: i/o timeout")
    except OSError as exc:
        return Outcome(Result.FAILURE, f"dial tcp {_join(host, port)}: connect: {_reason(exc)}")


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def _headers(action: Mapping[str, Any]) -> tuple[dict[str, str], str | None]:
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*"}
    host_header = None
    for entry in action.get("httpHeaders") or []:
        if not isinstance(entry, Mapping) or not entry.get("name"):
            continue
        name, value = str(entry["name"]), str(entry.get("value") or "")
        if name.lower() == "host":
            host_header = value
            continue
        # A header the probe names replaces the default of that name (case-insensitively).
        for default in [k for k in headers if k.lower() == name.lower()]:
            del headers[default]
        headers[name] = value
    return headers, host_header


def http_probe(action: Mapping[str, Any], host: str, port: int, timeout: float) -> Outcome:
    scheme = str(action.get("scheme") or "HTTP").lower()
    if scheme not in ("http", "https"):
        raise ProbeError(f"httpGet.scheme: must be HTTP or HTTPS, got {action.get('scheme')!r}")
    path = str(action.get("path") or "/")
    if not path.startswith("/"):
        path = "/" + path
    url = f"{scheme}://{_join(host, port)}{path}"
    headers, host_header = _headers(action)
    first_host = host
    for _ in range(MAX_REDIRECTS + 1):
        try:
            status, body, location = _get(url, headers, host_header, timeout)
        except TimeoutError:
            detail = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            return Outcome(Result.FAILURE, f'Get "{url}": {detail}')
        except ConnectionRefusedError as exc:
            where = _join(*_host_port(url))
            return Outcome(Result.FAILURE, f'Get "{url}": dial tcp {where}: connect: {_reason(exc)}')
        except (OSError, http.client.HTTPException) as exc:
            detail = _reason(exc) if isinstance(exc, OSError) else str(exc) or type(exc).__name__
            return Outcome(Result.FAILURE, f'Get "{url}": {detail}')
        if 300 <= status < 400 and location:
            target = urllib.parse.urljoin(url, location)
            parsed = urllib.parse.urlsplit(target)
            if parsed.scheme in ("http", "https") and parsed.hostname == first_host:
                url = target
                continue
            return Outcome(Result.WARNING, f"Probe terminated redirects, Response body: {body}")
        if 200 <= status < 400:
            return Outcome(Result.SUCCESS, body)
        return Outcome(Result.FAILURE, f"HTTP probe failed with statuscode: {status}")
    return Outcome(Result.FAILURE, f'Get "{url}": stopped after {MAX_REDIRECTS} redirects')


def _host_port(url: str) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _get(
    url: str, headers: Mapping[str, str], host_header: str | None, timeout: float
) -> tuple[int, str, str]:
    parts = urllib.parse.urlsplit(url)
    hostname, port = _host_port(url)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the kubelet's probes skip verification too
        conn = http.client.HTTPSConnection(hostname, port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(hostname, port, timeout=timeout)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.putrequest("GET", target or "/", skip_host=host_header is not None, skip_accept_encoding=True)
        if host_header is not None:
            conn.putheader("Host", host_header)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.putheader("Connection", "close")
        conn.endheaders()
        response = conn.getresponse()
        body = response.read(MAX_BODY_BYTES).decode("utf-8", "replace")
        return response.status, body, response.getheader("Location") or ""
    finally:
        conn.close()


def grpc_probe(host: str, port: int, service: str, timeout: float) -> Outcome:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    target = _join(host, port)
    with grpc.insecure_channel(target) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            return Outcome(
                Result.FAILURE, f"timeout: failed to connect service {target!r} within {timeout:g}s"
            )
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return Outcome(Result.FAILURE, f"timeout: health rpc did not complete within {timeout:g}s")
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            return Outcome(Result.FAILURE, f"error: health rpc probe failed: {detail}")
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if status != "SERVING":
        return Outcome(Result.FAILURE, f'service unhealthy (responded with "{status}")')
    return Outcome(Result.SUCCESS)
