"""One resource on the node: its gRPC server on a unix socket in the kubelet dir, and its registration.

Uses a `grpc.aio` server on its own loop thread (`kubenode.grpcaio.AioServer`): a
ListAndWatch stream is a coroutine, not a pool thread, so any number of idle streams
(up to the per-peer cap) leaves Allocate and GetDevicePluginOptions answering at once.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

import grpc

from deviceplugin.devicestate import DeviceState
from deviceplugin.metrics import NO_METRICS, PluginRecorder
from deviceplugin.service import MAX_STREAMS_PER_PEER, PLUGIN_OPTIONS, DevicePluginService, StreamHub
from kubenode.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubenode.deviceapi import API_VERSION
from kubenode.grpcaio import AioServer

log = logging.getLogger(__name__)

UNARY_WORKERS = 4  # threads for Allocate/GetPreferredAllocation work; streams need none
MAX_SOCKET_PATH = 107  # sun_path limit on Linux, without the terminating NUL
REGISTER_TIMEOUT_S = 5.0
STOP_GRACE_S = 0.2
# How long a stop waits for the gRPC server to report itself stopped. grpc.aio's server.stop() has been
# seen (once, in CI on a quiet machine) never to return; the process is on its way out then, and its
# loop thread is a daemon, so waiting longer than this only turns SIGTERM into a hang.
STOP_WAIT_S = 5.0


class EndpointError(RuntimeError):
    """The resource cannot be served (bad socket path, something else in the way)."""


class ResourceEndpoint:
    def __init__(
        self,
        resource_name: str,
        socket_name: str,
        state: DeviceState,
        kubelet_dir: str,
        *,
        max_streams_per_peer: int = MAX_STREAMS_PER_PEER,
    ) -> None:
        self.resource_name = resource_name
        self.socket_name = socket_name
        self.state = state
        self.kubelet_dir = Path(kubelet_dir)
        self.socket_path = self.kubelet_dir / socket_name
        if len(str(self.socket_path).encode()) > MAX_SOCKET_PATH:
            raise EndpointError(f"socket path {self.socket_path} is over {MAX_SOCKET_PATH} bytes")
        self.max_streams_per_peer = max_streams_per_peer
        self.recorder: PluginRecorder = NO_METRICS  # the manager sets it before serving
        self._service: DevicePluginService | None = None
        self._server: AioServer | None = None
        self._hub: StreamHub | None = None
        self._inode: int | None = None
        self.serve_count = 0

    def serve(self) -> None:
        """(Re)start the gRPC server on a fresh socket, removing a stale one of ours first."""
        # Our socket is gone from the directory, so no new call can reach the old server: no grace needed.
        self.stop(grace=0)
        self.kubelet_dir.mkdir(parents=True, exist_ok=True)
        self._remove_stale_socket()
        server = AioServer(self.socket_name, blocking_workers=UNARY_WORKERS)
        hub = StreamHub(self.state, server.loop)
        service = DevicePluginService(
            self.resource_name,
            self.state,
            hub,
            server.run_blocking,
            max_streams_per_peer=self.max_streams_per_peer,
            recorder=self.recorder,
        )
        # The generated *_pb2_grpc module has no type stubs.
        server.add_servicers(lambda aio: api_pb2_grpc.add_DevicePluginServicer_to_server(service, aio))
        try:
            server.add_insecure_port(f"unix://{self.socket_path}")
            server.start()
        except RuntimeError as exc:
            hub.stop()
            server.stop(0).wait()
            raise EndpointError(f"{self.resource_name}: cannot listen on {self.socket_path}: {exc}") from None
        self._server, self._hub, self._service = server, hub, service
        try:
            self._inode = os.stat(self.socket_path).st_ino
        except FileNotFoundError:
            # Removed under our feet (a starting kubelet wipes the dir): not intact, so served again.
            self.stop(grace=0)
            return
        self.serve_count += 1
        log.info("%s: serving on %s", self.resource_name, self.socket_path)

    def _remove_stale_socket(self) -> None:
        try:
            mode = os.lstat(self.socket_path).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise EndpointError(f"{self.resource_name}: {self.socket_path} exists and is not a socket")
        log.info("%s: removing stale socket %s", self.resource_name, self.socket_path)
        self.socket_path.unlink(missing_ok=True)

    def open_streams(self) -> int:
        service = self._service if self._server is not None else None
        return service.open_streams() if service is not None else 0

    def socket_intact(self) -> bool:
        """Is our socket still in place (the kubelet deletes every socket when it starts)?"""
        if self._server is None:
            return False
        try:
            return os.stat(self.socket_path).st_ino == self._inode
        except FileNotFoundError:
            return False

    def register(self, kubelet_socket: Path) -> None:
        """Register with the kubelet; raises grpc.RpcError when it refuses or is not there."""
        request = api_pb2.RegisterRequest(
            version=API_VERSION,
            endpoint=self.socket_name,
            resource_name=self.resource_name,
            options=PLUGIN_OPTIONS,
        )
        with grpc.insecure_channel(f"unix://{kubelet_socket}") as channel:
            stub = api_pb2_grpc.RegistrationStub(channel)
            stub.Register(request, timeout=REGISTER_TIMEOUT_S)
        log.info("%s: registered with %s", self.resource_name, kubelet_socket)

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        self.finish_stop(self.begin_stop(grace))

    def begin_stop(self, grace: float = STOP_GRACE_S) -> threading.Event | None:
        """Start stopping (in-flight calls get `grace` seconds); lets several endpoints stop in parallel."""
        if self._server is None:
            return None
        server, self._server = self._server, None
        if self._hub is not None:
            self._hub.stop()
            self._hub = None
        return server.stop(grace)

    def finish_stop(self, done: threading.Event | None) -> None:
        if done is None:
            return
        if not done.wait(STOP_WAIT_S):
            log.warning(
                "%s: the gRPC server did not stop within %.0f s; going on without it",
                self.socket_path,
                STOP_WAIT_S,
            )
        # Only remove the socket if it is still ours (grpc may already have).
        try:
            if os.stat(self.socket_path).st_ino == self._inode:
                self.socket_path.unlink()
        except FileNotFoundError:
            pass
        self._inode = None
