"""Reactor: many HTTP/1.1 requests in flight from one thread, on non-blocking kept-alive connections.

For a writer that sends many small requests at once (the scheduler's bindings and events), in
place of a thread per request in flight: a hundred threads each blocked on its own socket cost
more in GIL handoffs and wakeups than the requests themselves.
1. `submit` (from any thread) queues a request with its callback and wakes the reactor thread
   (started on first use) through a socket pair, unless a wakeup is already on its way.
2. The reactor hands each queued request to an idle connection (opening one, up to
   `max_connections`: TCP, then the TLS handshake without blocking), writes it, and waits on
   all its connections in one selector.
3. Bytes read go to the connection's response parser; a complete answer goes to the request's
   callback, on the reactor thread (callbacks must be short and never block; they may submit),
   and the connection takes the next queued request, unless either side said close.
4. A request not answered by its deadline, and any transport failure, closes its connection and
   fails that request with an `OSError`; nothing is retried (as `transport`). An idle connection
   the server closed is dropped when its end of file is read.
One request at a time on a connection (no pipelining): aiohttp's server, like Go's, answers a
connection's requests one after another, so pipelining would add no concurrency there.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable

from kubenode.kubeclient.transport import (
    MAX_HEADERS,
    MAX_LINE,
    HTTPProtocolError,
    Response,
    Transport,
    has_body,
    parse_head,
)

log = logging.getLogger(__name__)

Callback = Callable[[Response | None, OSError | None], None]
READ_SIZE = 262144
TIMEOUT_CHECK_S = 0.1  # how often deadlines are looked at while requests are in flight


class _Request:
    __slots__ = ("ahead", "callback", "deadline", "message", "method", "timeout")

    def __init__(self, method: str, message: bytes, timeout: float, callback: Callback, ahead: bool) -> None:
        self.ahead = ahead
        self.method = method
        self.message = message
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.callback = callback


class _Answer:
    """Reads one answer from bytes as they arrive: `feed` returns the Response once it is whole."""

    __slots__ = ("buffer", "chunks", "head", "method", "position")

    def __init__(self, method: str) -> None:
        self.method = method
        self.buffer = bytearray()
        self.head: tuple[int, int | None, bool, bool] | None = None  # status, length, chunked, keep
        self.chunks: list[bytes] = []
        self.position = 0  # where the chunked body's next chunk starts in `buffer`

    def feed(self, data: bytes) -> tuple[Response, bool] | None:
        """(answer, whether the connection may be reused) once complete, else None."""
        self.buffer += data
        while self.head is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_LINE * 4:
                    raise HTTPProtocolError("the answer's headers are too long")
                return None
            lines = bytes(self.buffer[:end]).split(b"\r\n")
            del self.buffer[: end + 4]
            if len(lines) > MAX_HEADERS + 1:
                raise HTTPProtocolError("too many headers")
            head = parse_head(lines[0], lines[1:])
            if 100 <= head.status < 200:
                continue  # an interim answer (100 Continue): the real one follows
            self.head = (head.status, head.length, head.chunked, head.keep)
        status, length, chunked, keep = self.head
        if not has_body(self.method, status):
            return Response(status, b""), keep
        if chunked:
            return self._chunked(status, keep)
        if length is not None:
            if len(self.buffer) < length:
                return None
            return Response(status, bytes(self.buffer[:length])), keep
        return None  # the body ends where the connection does: see `ended`

    def _chunked(self, status: int, keep: bool) -> tuple[Response, bool] | None:
        buffer = self.buffer
        while True:
            line_end = buffer.find(b"\r\n", self.position)
            if line_end < 0:
                return None
            try:
                size = int(bytes(buffer[self.position : line_end]).split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise HTTPProtocolError("bad chunk size") from None
            if size == 0:  # the last chunk; the trailers (if any) end with an empty line
                if buffer.find(b"\r\n\r\n", line_end) < 0:
                    return None
                return Response(status, b"".join(self.chunks)), keep
            start = line_end + 2
            if len(buffer) < start + size + 2:
                return None
            self.chunks.append(bytes(buffer[start : start + size]))
            self.position = start + size + 2

    def ended(self) -> Response:
        """The connection ended: the answer, if its body was to end there."""
        if self.head is not None:
            status, length, chunked, _ = self.head
            if length is None and not chunked:
                return Response(status, bytes(self.buffer))
        raise HTTPProtocolError("the server closed the connection without a whole answer")


class _Connection:
    __slots__ = ("answer", "out", "ready", "request", "sock", "writing")

    def __init__(self, sock: socket.socket, ready: bool) -> None:
        self.sock = sock
        self.ready = ready  # False until the TLS handshake is done
        self.request: _Request | None = None
        self.answer: _Answer | None = None
        self.out = memoryview(b"")
        self.writing = False  # registered for write readiness too


class Reactor:
    def __init__(self, transport: Transport, *, max_connections: int) -> None:
        self.transport = transport
        self.max_connections = max(1, max_connections)
        self._lock = threading.Lock()
        self._submitted: collections.deque[_Request] = collections.deque()
        self._wake_pending = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        # Owned by the reactor thread alone:
        self._selector = selectors.DefaultSelector()
        self._waiting: collections.deque[_Request] = collections.deque()
        self._waiting_ahead: collections.deque[_Request] = collections.deque()
        self._idle: list[_Connection] = []
        self._connections: set[_Connection] = set()

    # ----- any thread ---------------------------------------------------------------------------

    def submit(
        self, method: str, message: bytes, timeout: float, callback: Callback, *, ahead: bool = False
    ) -> None:
        """Queue one request (`message` as `Transport.message` builds it); `callback(answer, None)` or
        `callback(None, error)` runs later on the reactor thread (at once here if it is closed).
        `ahead`: sent before the requests waiting without it (a request that completes work already
        done, such as the event after a binding, goes before new work)."""
        request = _Request(method, message, timeout, callback, ahead)
        with self._lock:
            closed = self._closing
            if not closed and threading.current_thread() is self._thread:
                # From a callback: straight to the reactor's own queues, seen before it next waits
                # (through _submitted it would wait for a wakeup that nobody sends).
                (self._waiting_ahead if ahead else self._waiting).append(request)
                return
            if not closed:
                self._submitted.append(request)
                wake = not self._wake_pending
                self._wake_pending = True
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="kubeclient-reactor", daemon=True)
                    self._thread.start()
        if closed:
            callback(None, ConnectionAbortedError("the client is closed"))
        elif wake:
            with contextlib.suppress(BlockingIOError):  # the pair's buffer is full of wakeups already
                self._wake_w.send(b"\0")

    def close(self) -> None:
        """Fail what is queued or in flight, close every connection and end the thread."""
        with self._lock:
            self._closing = True
            thread = self._thread
        if thread is None:
            self._wake_r.close()
            self._wake_w.close()
            self._selector.close()
            return
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        if thread is not threading.current_thread():
            thread.join(10)

    # ----- the reactor thread -------------------------------------------------------------------

    def _run(self) -> None:
        selector = self._selector
        selector.register(self._wake_r, selectors.EVENT_READ, None)
        next_check = time.monotonic() + TIMEOUT_CHECK_S
        try:
            while True:
                with self._lock:
                    submitted, self._submitted = self._submitted, collections.deque()
                    self._wake_pending = False
                    closing = self._closing
                for request in submitted:
                    (self._waiting_ahead if request.ahead else self._waiting).append(request)
                if closing:
                    return
                self._dispatch()
                busy = bool(self._waiting or self._waiting_ahead) or len(self._idle) < len(self._connections)
                events = selector.select(TIMEOUT_CHECK_S if busy else None)
                for key, mask in events:
                    conn = key.data
                    if conn is None:
                        self._drain_wakeups()
                    else:
                        self._ready(conn, mask)
                if busy and (now := time.monotonic()) >= next_check:
                    next_check = now + TIMEOUT_CHECK_S
                    self._expire(now)
        except Exception:  # a bug here would strand every caller: fail them all, loudly
            log.exception("kubeclient reactor failed")
        finally:
            self._shut_down()

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _dispatch(self) -> None:
        """Give each waiting request a connection: an idle one, else a new one while under the limit."""
        while self._waiting_ahead or self._waiting:
            queue = self._waiting_ahead or self._waiting
            if self._idle:
                conn = self._idle.pop()
            elif len(self._connections) < self.max_connections:
                try:
                    conn = self._open()
                except OSError as exc:
                    self._finish(queue.popleft(), None, exc)
                    continue
            else:
                return
            request = queue.popleft()
            conn.request = request
            conn.answer = _Answer(request.method)
            conn.out = memoryview(request.message)
            if conn.ready:
                self._write(conn)

    def _open(self) -> _Connection:
        sock = self.transport.open_socket(0.0, handshake=False)
        conn = _Connection(sock, ready=not isinstance(sock, ssl.SSLSocket))
        self._connections.add(conn)
        # A TLS connection starts its handshake once the selector finds it writable.
        conn.writing = not conn.ready
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.writing else 0)
        self._selector.register(sock, events, conn)
        return conn

    def _handshake(self, conn: _Connection) -> None:
        sock = conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want_write(conn, False)
            return
        except ssl.SSLWantWriteError:
            self._want_write(conn, True)
            return
        except OSError as exc:
            self._drop(conn, exc)
            return
        conn.ready = True
        self._want_write(conn, False)
        if conn.request is not None:
            self._write(conn)
        else:
            self._idle.append(conn)

    def _want_write(self, conn: _Connection, want: bool) -> None:
        if conn.writing != want:
            conn.writing = want
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0)
            self._selector.modify(conn.sock, events, conn)

    def _write(self, conn: _Connection) -> None:
        try:
            while conn.out:
                sent = conn.sock.send(conn.out)
                conn.out = conn.out[sent:]
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            self._want_write(conn, True)
            return
        except OSError as exc:
            self._drop(conn, exc)
            return
        self._want_write(conn, False)

    def _ready(self, conn: _Connection, mask: int) -> None:
        if conn not in self._connections:
            return  # dropped earlier in this round
        if not conn.ready:
            self._handshake(conn)
            return
        if mask & selectors.EVENT_WRITE and conn.out:
            self._write(conn)
        if mask & selectors.EVENT_READ:
            self._read(conn)

    def _read(self, conn: _Connection) -> None:
        sock = conn.sock
        while True:
            try:
                data = sock.recv(READ_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError as exc:
                self._drop(conn, exc)
                return
            request, answer = conn.request, conn.answer
            if request is None or answer is None:
                # At rest a connection has nothing to say: this is its end (or junk); drop it.
                self._drop(conn, None)
                return
            try:
                if not data:
                    self._drop(conn, None, answer.ended())
                    return
                result = answer.feed(data)
            except OSError as exc:
                self._drop(conn, exc)
                return
            if result is not None:
                response, keep = result
                conn.request = conn.answer = None
                if keep:
                    self._idle.append(conn)
                else:
                    self._drop(conn, None)
                self._finish(request, response, None)
                return
            if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                return

    def _drop(self, conn: _Connection, error: OSError | None, response: Response | None = None) -> None:
        """Close the connection; its request (if any) gets `response`, or fails with `error`."""
        self._connections.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()
        request, conn.request, conn.answer = conn.request, None, None
        if request is not None:
            if response is None and error is None:
                error = HTTPProtocolError("the server closed the connection without answering")
            self._finish(request, response, error)

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._connections if c.request is not None and c.request.deadline <= now]:
            timeout = conn.request.timeout if conn.request is not None else 0.0
            self._drop(conn, TimeoutError(f"no answer within {timeout:g} s"))
        late: list[_Request] = []
        for queue in (self._waiting_ahead, self._waiting):
            # Only the head is looked at first: a client's requests mostly share its timeout, so
            # the head is the first to be late; scanning thousands waiting every round would cost.
            if queue and queue[0].deadline <= now:
                late += [r for r in queue if r.deadline <= now]
                kept = [r for r in queue if r.deadline > now]
                queue.clear()
                queue.extend(kept)
        for request in late:
            self._finish(request, None, TimeoutError(f"no connection free within {request.timeout:g} s"))

    def _finish(self, request: _Request, response: Response | None, error: OSError | None) -> None:
        try:
            request.callback(response, error)
        except Exception:  # a caller's bug must not stop the others' answers
            log.exception("kubeclient reactor: a request's callback failed")

    def _shut_down(self) -> None:
        with self._lock:
            self._closing = True
            self._waiting.extend(self._submitted)
            self._submitted.clear()
        closed = ConnectionAbortedError("the client is closed")
        for conn in list(self._connections):
            self._drop(conn, closed)
        waiting = [*self._waiting_ahead, *self._waiting]
        self._waiting_ahead.clear()
        self._waiting.clear()
        for request in waiting:
            self._finish(request, None, closed)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
