"""The authenticated daemon endpoint, bound when the agent starts and built on its first connection.

aiohttp and the handlers behind it (logs, exec, attach, port-forward: server.py and what it imports)
are about a seventh of a joined agent's memory (~10 MiB), and many nodes never see a caller. So
`LazySecureServer` binds the listening socket at once (a taken port fails at start, and the Node
names the port), and one thread waits for that socket to become readable: a connection waiting in
the backlog. Then it builds the real endpoint on the same socket (`build(sock)`: server.py's
SecureServer) and starts it; the waiting connection is accepted there like any later one (its TLS
handshake waits for the build, a fraction of a second). From then on, every call goes to the real
endpoint, until `stop`.

`prepare`, when given, runs first on that thread (the serving certificate: a CSR someone must approve, which
may take minutes or never come): the agent starts, registers its Node and runs its pods meanwhile, as the
kubelet does while its certificate manager waits; callers wait in the backlog. It gets an Event set by
`stop`; False from it leaves the endpoint off (the socket is closed).
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import threading
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

BACKLOG = 128


class Endpoint(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


class LazySecureServer:
    def __init__(
        self,
        host: str,
        port: int,
        build: Callable[[socket.socket], Endpoint],
        prepare: Callable[[threading.Event], bool] | None = None,
    ) -> None:
        self._build = build
        self._prepare = prepare
        self._stop_event = threading.Event()
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers do
            sock.bind(address)
            sock.listen(BACKLOG)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.address = "{}:{}".format(*sock.getsockname()[:2])
        self._wake_read, self._wake_write = os.pipe()
        self._lock = threading.Lock()
        self._stopping = False
        self._endpoint: Endpoint | None = None
        self._thread = threading.Thread(target=self._wait, name="secure-listen", daemon=True)

    @property
    def built(self) -> bool:
        """Whether a connection came and the real endpoint serves (tests, metrics)."""
        return self._endpoint is not None

    def start(self) -> None:
        self._thread.start()

    def _wait(self) -> None:
        if self._prepare is not None and not self._prepare(self._stop_event):
            self._sock.close()  # callers are refused from now on, not left waiting in the backlog
            return
        with selectors.DefaultSelector() as selector:
            selector.register(self._sock, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            selector.select()
        with self._lock:
            if self._stopping:
                return
            try:
                endpoint = self._build(self._sock)
                endpoint.start()
            except Exception:  # the endpoint is lost, the agent and its pods are not
                log.exception("the authenticated daemon endpoint could not be built; logs and exec are off")
                self._sock.close()
                return
            self._endpoint = endpoint
        log.info("authenticated daemon endpoint on %s serving (first connection)", self.address)

    def stop(self) -> None:
        self._stop_event.set()
        with self._lock:
            self._stopping = True
            endpoint = self._endpoint
        os.write(self._wake_write, b"x")
        if self._thread.is_alive():
            self._thread.join(10)
        if endpoint is not None:
            endpoint.stop()  # closes the socket with its server
        else:
            self._sock.close()  # a second close (prepare failed) does nothing
        os.close(self._wake_read)
        os.close(self._wake_write)
