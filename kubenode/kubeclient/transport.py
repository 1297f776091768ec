"""Transport: one HTTP/1.1 request and its whole answer over a pool of kept-alive connections.

KubeClient's unary verbs (get, list, create, update, patch, delete) go through here; a watch, which
streams, takes a connection of its own (`open_socket`) and reads it with `http.client`. Per request
urllib3 and http.client cost about 0.45 ms of CPU (URL parsing, pool-key normalization, header dicts,
an email-module parse of the answer's headers); a scheduler makes two requests per pod, so that was its
largest cost. This does the same exchange directly:
1. take an idle connection (LIFO; one the server has closed meanwhile, seen as readable at
   rest, is discarded) or open one (TCP_NODELAY, connect timeout, TLS from the config); at most
   MAX_DIALS are being opened at once, and a request that finds none idle while they are waits for
   whichever comes first, a connection given back or a free dial (below);
2. send the request line, the prebuilt header block and the body in one write;
3. read the status line and headers, then the body by Content-Length, chunked encoding, or
   to the end of the connection;
4. give the connection back, unless either side said `Connection: close` (or HTTP/1.0).
With `max_connections`, at most that many requests are on the wire at once and the others wait
for a turn (up to their own timeout), as requests multiplexed over one HTTP/2 connection share it:
a process with a thousand client threads (the hollow nodes) then holds a few connections, instead
of opening a TLS connection per request in flight whenever the answers slow down.
Why the dial bound: a burst (a thousand hollow nodes deleting pods at once) found every pooled
connection busy and opened dozens at the same moment; each is a TLS handshake on the API server's
event loop, which was busiest just then, so they timed out and were retried on yet more new ones.
Go's HTTP/2 transport, which kubelets use, opens one connection per host at a time for the same reason.
Like the urllib3 pool it replaces (retries=False), nothing is retried: any failure closes
that connection and raises `OSError` (or `ssl.SSLError`, `HTTPProtocolError`) to the caller.
"""

from __future__ import annotations

import collections
import io
import select
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

from kubenode.kubeclient.config import ClientConfig

MAX_LINE = 65536
MAX_DIALS = 2  # connections being opened at once (each a TLS handshake on the server's loop)
MAX_HEADERS = 200


class HTTPProtocolError(OSError):
    """The server's answer is not HTTP/1.x as we can read it."""


@dataclass(frozen=True)
class Response:
    status: int
    data: bytes


def tls_context(config: ClientConfig) -> ssl.SSLContext:
    """The config's TLS as urllib3 would set it up: verify against ca_file (else the system's CAs)
    unless verify_ssl is off; client certificate and key when given."""
    context = ssl.create_default_context(cafile=config.ca_file) if config.verify_ssl else None
    if context is None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config.cert_file:
        context.load_cert_chain(config.cert_file, config.key_file)
    return context


class _Connection:
    __slots__ = ("reader", "sock", "timeout")

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")
        self.timeout = timeout

    def dropped(self) -> bool:
        """At rest a kept-alive connection has nothing to read; readable means closed (EOF) or junk."""
        try:
            readable, _, _ = select.select((self.sock,), (), (), 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()


class Transport:
    def __init__(
        self,
        config: ClientConfig,
        *,
        pool_size: int,
        connect_timeout: float,
        max_connections: int | None = None,
    ) -> None:
        url = urllib.parse.urlsplit(config.host)
        self.https = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.https else 80)
        self.host_header = url.netloc.rsplit("@", 1)[-1]
        self.prefix = url.path.rstrip("/")  # a server URL with a path (behind a proxy) keeps it
        self.server_hostname = config.tls_server_name or self.host
        self.context = tls_context(config) if self.https else None
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._idle: collections.deque[_Connection] = collections.deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a connection given back, or a dial ended
        self._dialing = 0
        self.waiting_for_dial = 0  # requests waiting for a connection while MAX_DIALS are being opened
        self._turns = threading.BoundedSemaphore(max_connections) if max_connections else None

    # ----- the pool ----------------------------------------------------------------------------

    def open_socket(self, timeout: float, *, handshake: bool = True) -> socket.socket:
        """A socket connected to the server (TCP_NODELAY; TLS from the config, its handshake done now
        unless `handshake` is False); then `timeout` (0: non-blocking) for its reads and writes."""
        sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(
                    sock, server_hostname=self.server_hostname, do_handshake_on_connect=handshake
                )
            sock.settimeout(timeout)
        except BaseException:
            sock.close()
            raise
        return sock

    def _connect(self, timeout: float) -> _Connection:
        return _Connection(self.open_socket(timeout), timeout)

    def _take(self, timeout: float) -> _Connection:
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                if not self._idle and self._dialing >= MAX_DIALS:
                    self._wait_for_connection_or_dial(deadline, timeout)
                conn = self._idle.pop() if self._idle else None
                if conn is None:
                    self._dialing += 1
            if conn is None:
                try:
                    return self._connect(timeout)
                finally:
                    with self._changed:
                        self._dialing -= 1
                        self._changed.notify()
            if conn.dropped():
                conn.close()
                continue
            if conn.timeout != timeout:
                conn.sock.settimeout(timeout)
                conn.timeout = timeout
            return conn

    def _wait_for_connection_or_dial(self, deadline: float, timeout: float) -> None:
        """With the lock held: wait until a connection is idle or a dial is free, up to the deadline."""
        self.waiting_for_dial += 1
        try:
            while not self._idle and self._dialing >= MAX_DIALS:
                left = deadline - time.monotonic()
                if left <= 0 or not self._changed.wait(left):
                    raise TimeoutError(f"no connection free within {timeout:g} s")
        finally:
            self.waiting_for_dial -= 1

    def _give_back(self, conn: _Connection) -> None:
        with self._changed:
            if len(self._idle) < self.pool_size:
                self._idle.append(conn)
                self._changed.notify()
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = list(self._idle), collections.deque()
        for conn in idle:
            conn.close()

    # ----- one exchange ------------------------------------------------------------------------

    def message(self, method: str, target: str, headers: bytes, body: bytes | None) -> bytes:
        """The request's bytes: `target` is the path and query; `headers` the encoded header lines
        (each ending CRLF), without Host and Content-Length, which are added here."""
        head = f"{method} {self.prefix}{target} HTTP/1.1\r\nHost: {self.host_header}\r\n".encode()
        if body is not None:
            return b"%b%bContent-Length: %d\r\n\r\n%b" % (head, headers, len(body), body)
        return head + headers + b"\r\n"

    def request(
        self, method: str, target: str, headers: bytes, body: bytes | None, timeout: float
    ) -> Response:
        """One exchange (see `message` for the arguments), on this thread."""
        message = self.message(method, target, headers, body)
        if self._turns is None:
            return self._exchange(method, message, timeout)
        if not self._turns.acquire(timeout=timeout):
            raise TimeoutError(f"no connection free within {timeout:g} s")
        try:
            return self._exchange(method, message, timeout)
        finally:
            self._turns.release()

    def _exchange(self, method: str, message: bytes, timeout: float) -> Response:
        conn = self._take(timeout)
        try:
            conn.sock.sendall(message)
            status, data, keep = _read_response(conn.reader, method)
        except BaseException:
            conn.close()
            raise
        if keep:
            self._give_back(conn)
        else:
            conn.close()
        return Response(status, data)


def _line(reader: io.BufferedReader) -> bytes:
    line = reader.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise HTTPProtocolError("header line too long")
    return line


@dataclass(frozen=True)
class Head:
    """An answer's status line and the headers that frame its body."""

    status: int
    length: int | None  # Content-Length, if given
    chunked: bool
    keep: bool  # whether the connection may be reused after this answer


def parse_head(status_line: bytes, header_lines: list[bytes]) -> Head:
    """The status line and header lines (each with or without its CRLF) of one answer."""
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise HTTPProtocolError(f"bad status line {status_line[:80]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise HTTPProtocolError(f"bad status line {status_line[:80]!r}") from None
    length: int | None = None
    chunked = False
    keep = parts[0] != b"HTTP/1.0"
    for line in header_lines:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise HTTPProtocolError(f"bad Content-Length {value.strip()[:40]!r}") from None
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            token = value.strip().lower()
            if token == b"close":
                keep = False
            elif token == b"keep-alive":
                keep = True
    return Head(status, length, chunked, keep)


def has_body(method: str, status: int) -> bool:
    return method != "HEAD" and status not in (204, 304)


def _read_response(reader: io.BufferedReader, method: str) -> tuple[int, bytes, bool]:
    """(status, body, whether the connection may be reused)."""
    while True:
        status_line = _line(reader)
        if not status_line:
            raise HTTPProtocolError("the server closed the connection without answering")
        lines: list[bytes] = []
        while True:
            line = _line(reader)
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise HTTPProtocolError("the connection ended inside the headers")
            if len(lines) == MAX_HEADERS:
                raise HTTPProtocolError("too many headers")
            lines.append(line)
        head = parse_head(status_line, lines)
        if not 100 <= head.status < 200:
            break  # an interim answer (100 Continue) is skipped: the real one follows
    status, keep = head.status, head.keep
    if not has_body(method, status):
        return status, b"", keep
    if head.chunked:
        return status, _read_chunked(reader), keep
    if head.length is not None:
        data = reader.read(head.length)
        if len(data) != head.length:
            raise HTTPProtocolError(f"the connection ended after {len(data)} of {head.length} body bytes")
        return status, data, keep
    return status, reader.read(), False  # the body ends where the connection does


def _read_chunked(reader: io.BufferedReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        size_line = _line(reader)
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise HTTPProtocolError(f"bad chunk size {size_line[:40]!r}") from None
        if size == 0:
            while _line(reader) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        chunk = reader.read(size)
        if len(chunk) != size:
            raise HTTPProtocolError("the connection ended inside a chunk")
        chunks.append(chunk)
        _line(reader)  # the CRLF after the chunk
