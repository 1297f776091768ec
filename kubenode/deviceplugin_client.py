"""The kubelet side's client of one device plugin's socket, shared by the agent's device manager and
`kubenode conformance` (which plays the kubelet against any plugin).

`dial` blocks until the unix socket's channel is ready, as the kubelet's dial does (10 s by default);
`plugin_stub` wraps a channel in the generated DevicePlugin stub; `rpc_error_text` puts a gRPC error in
one line for messages and logs; `is_serving` says, without waiting, whether anything accepts connections
on a socket (a kubelet.sock someone else already serves, a plugin socket that is up at Register).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from pathlib import Path
from typing import Any

import grpc

from kubenode.api.deviceplugin.v1beta1 import api_pb2_grpc
from kubenode.deviceapi import DIAL_TIMEOUT_S

log = logging.getLogger(__name__)


def plugin_stub(channel: grpc.Channel) -> Any:
    """A DevicePlugin client stub (the generated module has no annotations, hence Any)."""
    return api_pb2_grpc.DevicePluginStub(channel)


def dial(socket_path: Path, timeout: float = DIAL_TIMEOUT_S) -> grpc.Channel:
    """Open a channel to a unix socket and wait until it is ready (the kubelet's blocking dial)."""
    channel = grpc.insecure_channel(
        f"unix://{socket_path}", options=[("grpc.default_authority", "localhost")]
    )
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        channel.close()
        raise TimeoutError(
            f"failed to dial device plugin: {socket_path} not ready within {timeout:g} s"
        ) from None
    return channel


def rpc_error_text(err: grpc.RpcError) -> str:
    """A one-line description of a gRPC error: code name and details."""
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    return f"{code.name if code else 'error'}: {details}"


def is_serving(path: Path) -> bool:
    """Whether something accepts connections on the unix socket right now (no waiting)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(os.fspath(path))
        except OSError as err:
            if err.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK, errno.EACCES, None):
                log.debug("probe of %s: %s", path, err)
            return False
    return True
