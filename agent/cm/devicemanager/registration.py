"""The kubelet's Registration service: plugin-dir cleanup, Register validation and its messages.

The service runs on grpc.aio (`serve_registration`). A Register waits for the manager's
verdict, which includes dialling the plugin back and asking for its options; that runs on
a thread of its own per request, awaited by a coroutine, so a plugin whose
GetDevicePluginOptions never returns holds one thread until its own deadline (see
`agent.cm.devicemanager.endpoint`), never a server worker, and a legitimate Register is
answered at once however many stuck ones are pending. At most
`MAX_REGISTRATIONS_IN_FLIGHT` are pending; one more is refused with RESOURCE_EXHAUSTED.
Echoed names are cut (`go_quote`), so a 64 KB resource name cannot overflow the trailer.
"""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import grpc

from kubenode.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubenode.deviceapi import MAX_ECHOED_ID, SUPPORTED_VERSIONS, clip_message, is_plugin_endpoint
from kubenode.grpcaio import AioServer, in_thread
from kubenode.model.resources import extended_resource_name_problem

log = logging.getLogger(__name__)

MAX_REGISTRATIONS_IN_FLIGHT = 256


def go_quote(value: str) -> str:
    """Quote like Go's %q, as the kubelet's messages do; a value over MAX_ECHOED_ID characters is cut."""
    if len(value) > MAX_ECHOED_ID:
        return f"{json.dumps(value[:MAX_ECHOED_ID])}...({len(value)} characters)"
    return json.dumps(value)


def validate_register(request: api_pb2.RegisterRequest) -> str | None:
    """The kubelet's checks on a RegisterRequest, in its order; returns its message, or None when valid."""
    if request.version not in SUPPORTED_VERSIONS:
        return (
            f"requested API version {go_quote(request.version)} is not supported by kubelet. "
            f"Supported version is {', '.join(go_quote(v) for v in SUPPORTED_VERSIONS)}"
        )
    if (problem := extended_resource_name_problem(request.resource_name)) is not None:
        # The kubelet's message gives no reason; the log does.
        log.info("ResourceName %s %s", go_quote(request.resource_name), problem)
        return f"the ResourceName {go_quote(request.resource_name)} is invalid"
    if not is_plugin_endpoint(request.endpoint):
        return (
            f"the Endpoint {go_quote(request.endpoint)} is invalid: "
            "it must be the file name of the plugin's socket inside the device-plugin directory"
            " (the kubelet also takes a path below it; kubenode does not, see docs/devicemanager.md)"
        )
    return None


def remove_stale_sockets(plugin_dir: Path) -> list[Path]:
    """Delete every socket in the directory (not sub-directories, not other files), as the kubelet does."""
    removed: list[Path] = []
    for entry in plugin_dir.iterdir():
        try:
            if not stat.S_ISSOCK(entry.lstat().st_mode):
                continue
            entry.unlink()
        except FileNotFoundError:
            continue
        removed.append(entry)
    if removed:
        log.info("removed stale sockets in %s: %s", plugin_dir, ", ".join(p.name for p in removed))
    return removed


class _Bindable(Protocol):
    def add_insecure_port(self, address: str) -> int: ...


def bind_unix(server: _Bindable, path: Path) -> None:
    """Listen on a unix socket, replacing a stale socket (never another kind of file) at that path."""
    try:
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
    except FileNotFoundError:
        pass
    if server.add_insecure_port(f"unix://{path}") == 0:
        raise OSError(f"cannot listen on {path}")


class RegistrationServicer(api_pb2_grpc.RegistrationServicer):
    """Answers Register with the handler's verdict; a rejection carries the kubelet's message.

    The handler blocks (it dials the plugin back); each call gets a thread of its own."""

    def __init__(self, handle: Callable[[api_pb2.RegisterRequest], str | None]) -> None:
        self._handle = handle
        self.in_flight = 0

    async def Register(
        self, request: api_pb2.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> api_pb2.Empty:
        if self.in_flight >= MAX_REGISTRATIONS_IN_FLIGHT:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self.in_flight} registrations are pending; try again later",
            )
        self.in_flight += 1
        try:
            error = await in_thread(self._handle, request)
        finally:
            self.in_flight -= 1
        if error is not None:
            # The kubelet returns a plain Go error, which gRPC sends as code Unknown.
            await context.abort(grpc.StatusCode.UNKNOWN, clip_message(error))
        return api_pb2.Empty()


def serve_registration(
    handle: Callable[[api_pb2.RegisterRequest], str | None], socket_path: Path
) -> AioServer:
    """Serve the Registration service on `socket_path` (replacing a stale socket) and return the server."""
    server = AioServer("dm-registration")
    servicer = RegistrationServicer(handle)
    # The generated gRPC module has no annotations.
    server.add_servicers(lambda aio: api_pb2_grpc.add_RegistrationServicer_to_server(servicer, aio))
    bind_unix(server, socket_path)
    server.start()
    return server
