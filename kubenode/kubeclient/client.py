"""KubeClient: REST verbs on raw JSON, with the loaded config's TLS and auth.

The unary verbs go over `transport` (HTTP/1.1 on kept-alive connections, a fraction of
urllib3's CPU a request); `request_async` sends the same requests from one reactor thread
(`reactor`) for writers with many in flight; a watch, which streams, gets a connection of its own from
`transport` (the same TLS and dialling) and is read with the standard library's `http.client` (chunked
decoding), so no HTTP library beyond the standard one is imported: urllib3 (about 80 modules and
2.5 MiB of a process's RSS) used to carry the watches alone.

Objects go in and come out as plain dicts (orjson), so a consumer decodes straight into its
own model; nothing passes through the official client's generated models, which cost
milliseconds per pod. A non-2xx answer raises the typed `ApiError` for its code with the
Status reason and message; no answer at all raises `TransportError`.

Paths are built from a `Resource` (plural, group, version, namespaced), so one client
serves core/v1 and coordination.k8s.io/v1 alike, against `kubenode apiserver` or a real
kube-apiserver.
"""

from __future__ import annotations

import builtins
import contextlib
import http.client
import logging
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from kubenode.kubeclient.config import ClientConfig
from kubenode.kubeclient.errors import ApiError, KubeError, TransportError, api_error
from kubenode.kubeclient.reactor import Reactor
from kubenode.kubeclient.transport import Response, Transport

log = logging.getLogger(__name__)

PATCH_TYPES = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
CONNECT_TIMEOUT_S = 10.0  # TCP connect and TLS handshake: client-go's TLSHandshakeTimeout
READ_TIMEOUT_S = 30.0
WATCH_READ_MARGIN_S = 30.0  # a watch's socket may be quiet this much longer than its timeoutSeconds

Query = Mapping[str, str | int | bool | None]


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str = "") -> str:
        """/api/v1/namespaces/ns/pods/name/status; a namespaced resource without namespace means all."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{_quote(namespace)}")
        parts.append(self.plural)
        if name:
            parts.append(_quote(name))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


PODS = Resource("pods", "Pod")
NODES = Resource("nodes", "Node", namespaced=False)
NAMESPACES = Resource("namespaces", "Namespace", namespaced=False)
EVENTS = Resource("events", "Event")
LEASES = Resource("leases", "Lease", group="coordination.k8s.io")
# Dynamic Resource Allocation: the scheduler allocates, the agent prepares, `kubenode trace pod` explains.
RESOURCE_SLICES = Resource(
    "resourceslices", "ResourceSlice", group="resource.k8s.io", version="v1", namespaced=False
)
DEVICE_CLASSES = Resource(
    "deviceclasses", "DeviceClass", group="resource.k8s.io", version="v1", namespaced=False
)
RESOURCE_CLAIMS = Resource("resourceclaims", "ResourceClaim", group="resource.k8s.io", version="v1")
# The per-NUMA-zone resources a node publishes (the noderesourcetopology-api CRD's shape).
NODE_RESOURCE_TOPOLOGIES = Resource(
    "noderesourcetopologies",
    "NodeResourceTopology",
    group="topology.node.k8s.io",
    version="v1alpha2",
    namespaced=False,
)


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _encode_query(query: Query | None) -> str:
    if not query:
        return ""
    items = []
    for key, value in query.items():
        if value is None:
            continue
        items.append((key, ("true" if value else "false") if isinstance(value, bool) else str(value)))
    return "?" + urllib.parse.urlencode(items) if items else ""


class KubeClient:
    def __init__(
        self,
        config: ClientConfig,
        *,
        user_agent: str = "kubenode",
        timeout: float = READ_TIMEOUT_S,
        pool_size: int = 8,
        max_connections: int | None = None,
        async_connections: int = 16,
    ) -> None:
        """pool_size: idle connections kept; max_connections: unary requests on the wire at once
        (the rest wait their turn; default unbounded); async_connections: the same for
        `request_async`, whose connections are the reactor's own. Each open watch holds a
        connection of its own."""
        self.config = config
        self.user_agent = user_agent
        self.timeout = timeout
        self._transport = Transport(
            config, pool_size=pool_size, connect_timeout=CONNECT_TIMEOUT_S, max_connections=max_connections
        )
        self._header_blocks: dict[tuple[str | None, str | None], bytes] = {}
        self._async_connections = async_connections
        self._reactor: Reactor | None = None  # made on the first request_async
        self._reactor_lock = threading.Lock()
        self._async_closed = False

    def close(self) -> None:
        self._transport.close()
        with self._reactor_lock:
            reactor = self._reactor
            self._async_closed = True  # later request_async calls fail at once (a reactor is not remade)
        if reactor is not None:
            reactor.close()

    # ----- raw requests ------------------------------------------------------------------------

    def _headers(self, content_type: str | None, auth: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        if auth:
            headers["Authorization"] = auth
        return headers

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        decode: bool = True,
    ) -> dict[str, Any]:
        """One request; the decoded JSON answer, or a typed error. decode=False: a success's answer is
        not read ({}), for writers that need only to know it succeeded (events, bindings)."""
        data = None if body is None else orjson.dumps(body)
        headers = self._header_block(content_type if data is not None else None)
        try:
            resp = self._transport.request(
                method, path + _encode_query(query), headers, data, timeout or self.timeout
            )
        except OSError as exc:  # ssl.SSLError and HTTPProtocolError are OSErrors too
            raise TransportError(f"{method} {path}: {exc}") from None
        return _answer(resp, f"{method} {path}", decode)

    def request_async(
        self,
        method: str,
        path: str,
        done: Callable[[dict[str, Any] | None, KubeError | None], None],
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        decode: bool = True,
        ahead: bool = False,
    ) -> None:
        """`request` without waiting: `done(answer, None)` or `done(None, error)` is called later on the
        client's reactor thread (`kubeclient.reactor`), which must not be blocked; at most
        `async_connections` such requests are on the wire at once, the rest wait their turn
        (`ahead`: before those waiting without it)."""
        data = None if body is None else orjson.dumps(body)
        headers = self._header_block(content_type if data is not None else None)
        message = self._transport.message(method, path + _encode_query(query), headers, data)
        what = f"{method} {path}"

        def answered(resp: Response | None, error: OSError | None) -> None:
            if resp is None:
                done(None, TransportError(f"{what}: {error}"))
                return
            try:
                result = _answer(resp, what, decode)
            except KubeError as exc:
                done(None, exc)
                return
            done(result, None)

        self._reactor_for_async().submit(method, message, timeout or self.timeout, answered, ahead=ahead)

    def _reactor_for_async(self) -> Reactor:
        reactor = self._reactor
        if reactor is None:
            with self._reactor_lock:
                if self._reactor is None:
                    self._reactor = Reactor(self._transport, max_connections=self._async_connections)
                    if self._async_closed:
                        self._reactor.close()
                reactor = self._reactor
        return reactor

    def _header_block(self, content_type: str | None) -> bytes:
        """The encoded header lines for this content type and the current Authorization, built once."""
        auth = self.config.authorization()
        key = (content_type, auth)
        block = self._header_blocks.get(key)
        if block is None:
            if len(self._header_blocks) > 16:  # a rotating token: drop the old blocks
                self._header_blocks.clear()
            lines = (f"{k}: {v}\r\n" for k, v in self._headers(content_type, auth).items())
            block = "".join(lines).encode("latin-1")
            self._header_blocks[key] = block
        return block

    # ----- verbs ------------------------------------------------------------------------------

    def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str = "",
        query: Query | None = None,
    ) -> dict[str, Any]:
        return self.request("GET", resource.path(namespace, name, subresource), query=query)

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """One page of a list (the List object, with metadata.resourceVersion and .continue)."""
        query = {
            "fieldSelector": field_selector or None,
            "labelSelector": label_selector or None,
            "limit": limit,
            "continue": continue_token or None,
            "resourceVersion": resource_version,
        }
        return self.request("GET", resource.path(namespace), query=query)

    def list_all(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
        page_size: int = 500,
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        """Every item (following `continue`), and the list's resourceVersion (of the first page)."""
        items: builtins.list[dict[str, Any]] = []
        token: str | None = None
        version = ""
        while True:
            page = self.list(
                resource,
                namespace,
                field_selector=field_selector,
                label_selector=label_selector,
                limit=page_size,
                continue_token=token,
            )
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = meta.get("continue") or None
            if not token:
                return items, version

    def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        name: str | None = None,
        subresource: str = "",
        decode: bool = True,
    ) -> dict[str, Any]:
        """POST; with `name` and `subresource`, POST to a subresource (pods/<p>/binding, .../eviction).
        decode=False returns {} instead of the created object."""
        return self.request("POST", resource.path(namespace, name, subresource), body=body, decode=decode)

    def update(self, resource: Resource, body: Mapping[str, Any], *, subresource: str = "") -> dict[str, Any]:
        """PUT the whole object (its metadata names it; its resourceVersion is the precondition)."""
        meta = body.get("metadata") or {}
        path = resource.path(meta.get("namespace"), meta["name"], subresource)
        return self.request("PUT", path, body=body)

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str = "",
        patch_type: str = "strategic",
        decode: bool = True,
    ) -> dict[str, Any]:
        """PATCH with `patch_type` strategic (default), merge or json; decode=False returns {}."""
        return self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type=PATCH_TYPES[patch_type],
            decode=decode,
        )

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
    ) -> dict[str, Any]:
        """DELETE with DeleteOptions; `uid`/`resource_version` become preconditions (409 on mismatch)."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v is not None
        }
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        return self.request("DELETE", resource.path(namespace, name), body=options)

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str = "",
        timeout_seconds: int = 300,
        field_selector: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = True,
    ) -> WatchStream:
        """Open a watch; iterate the returned stream for event dicts ({"type", "object"}).

        An expired resourceVersion arrives either as HTTP 410 (raised here as `Gone`) or in-band
        as an ERROR event whose object is a Status with code 410; the consumer handles both."""
        query = {
            "watch": "1",
            "resourceVersion": resource_version or None,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": allow_bookmarks,
            "fieldSelector": field_selector or None,
            "labelSelector": label_selector or None,
        }
        path = resource.path(namespace)
        what = f"WATCH {path}"
        try:
            # Connect and handshake within CONNECT_TIMEOUT_S (the transport's), then reads may be quiet
            # for the watch's timeoutSeconds and a margin.
            sock = self._transport.open_socket(timeout_seconds + WATCH_READ_MARGIN_S)
        except OSError as exc:
            raise TransportError(f"{what}: {exc}") from None
        resp = http.client.HTTPResponse(sock, method="GET")
        try:
            target = path + _encode_query(query)
            sock.sendall(self._transport.message("GET", target, self._header_block(None), None))
            resp.begin()
            if resp.status >= 300:
                data = resp.read()
                raise _error(resp.status, data, what)
        except (OSError, http.client.HTTPException) as exc:
            _close_stream(sock, resp)
            raise TransportError(f"{what}: {exc}") from None
        except BaseException:
            _close_stream(sock, resp)
            raise
        return WatchStream(resp, sock, path)


def _close_stream(sock: socket.socket, resp: http.client.HTTPResponse) -> None:
    """End a watch's connection: shutdown first, which wakes a read blocked on it in another thread."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):  # closing races with the reader; either way the stream ends
        resp.close()
    sock.close()


def _answer(resp: Response, what: str, decode: bool) -> dict[str, Any]:
    """The decoded JSON answer ({} when empty or not wanted), or the typed error."""
    data = resp.data
    if resp.status >= 300:
        raise _error(resp.status, data, what)
    if not data or not decode:
        return {}
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ApiError(resp.status, "BadResponse", f"{what}: not JSON: {exc}") from None
    return decoded if isinstance(decoded, dict) else {"items": decoded}


def _error(code: int, data: bytes, what: str) -> ApiError:
    status: Any = None
    with contextlib.suppress(orjson.JSONDecodeError):
        status = orjson.loads(data) if data else None
    text = data[:200].decode("utf-8", "replace").strip() if data else ""
    return api_error(code, status, f"{what}: {text or 'HTTP ' + str(code)}")


class WatchStream:
    """The events of one open watch, one JSON object per line; `close()` from any thread ends it."""

    def __init__(self, resp: http.client.HTTPResponse, sock: socket.socket, path: str) -> None:
        self._resp = resp
        self._sock = sock
        self._path = path
        self._closed = threading.Event()

    def close(self) -> None:
        self._closed.set()
        _close_stream(self._sock, self._resp)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buffer = b""
        try:
            while not self._closed.is_set():
                try:
                    chunk = self._resp.read1(65536)
                except Exception as exc:
                    if self._closed.is_set():
                        return
                    raise TransportError(f"watch {self._path}: {exc}") from None
                if not chunk:
                    return  # the server ended the watch (timeoutSeconds) or closed the connection
                buffer += chunk
                if b"\n" not in chunk:
                    continue
                lines = buffer.split(b"\n")  # once per chunk: splitting one line off at a time
                buffer = lines.pop()  # copied the rest of a 64 KiB chunk for every event in it
                for line in lines:
                    if line.strip():
                        try:
                            event = orjson.loads(line)
                        except orjson.JSONDecodeError as exc:
                            raise TransportError(f"watch {self._path}: bad event: {exc}") from None
                        yield event
        finally:
            self.close()
