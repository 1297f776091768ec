"""`CRIClient`: the kubelet's remote runtime and image services over one gRPC channel to a unix socket.

`CRIClient.connect(endpoint)` takes the kubelet's `--container-runtime-endpoint` form (`unix:///path`, or
a bare absolute path), opens a channel and asks `Version`: an endpoint that is not there, or that answers with
an API other than `runtime.v1`'s `v1`, is one `CRIError` naming the endpoint. Every call has a deadline; a
failed call raises `CRIError` (with the gRPC code), which the CRI runtime turns into a status, never a
crash. gRPC's channel reconnects by itself: a runtime that dies and comes back is used again.
"""

from __future__ import annotations

from typing import Any

import grpc

from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.api.cri.v1 import api_pb2_grpc as cri_grpc
from kubenode.criendpoint import socket_path

DEFAULT_TIMEOUT_S = 10.0  # the kubelet's runtimeRequestTimeout is 2 min; a local containerd answers in ms
PULL_TIMEOUT_S = 120.0
SUPPORTED_API = "v1"


class CRIError(Exception):
    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code

    @property
    def not_found(self) -> bool:
        return bool(self.code == grpc.StatusCode.NOT_FOUND)

    @property
    def unavailable(self) -> bool:
        return self.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class CRIClient:
    def __init__(self, endpoint: str, channel: grpc.Channel) -> None:
        self.endpoint = endpoint
        self._channel = channel
        self.runtime = cri_grpc.RuntimeServiceStub(channel)
        self.images = cri_grpc.ImageServiceStub(channel)
        self.runtime_name = "cri"  # the runtime's own name once connected (containerd), for container IDs

    @classmethod
    def connect(cls, endpoint: str, timeout: float = DEFAULT_TIMEOUT_S) -> CRIClient:
        path = socket_path(endpoint)
        channel = grpc.insecure_channel(
            f"unix://{path}",
            options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)],
        )
        client = cls(endpoint, channel)
        try:
            version = client.version(timeout)
        except CRIError as exc:
            channel.close()
            if exc.code == grpc.StatusCode.UNIMPLEMENTED:
                # A runtime that speaks only an older CRI (v1alpha2, dropped by the kubelet in 1.26)
                # has no runtime.v1 service at all: say that, not just gRPC's "method not found".
                raise CRIError(
                    f"container runtime endpoint {endpoint}: does not serve CRI runtime.v1 (the agent "
                    f"speaks CRI {SUPPORTED_API}; an older runtime may speak only v1alpha2): {exc}",
                    exc.code,
                ) from None
            raise CRIError(f"container runtime endpoint {endpoint}: {exc}", exc.code) from None
        if version.runtime_api_version != SUPPORTED_API:
            channel.close()
            raise CRIError(
                f"container runtime endpoint {endpoint}: runtime API {version.runtime_api_version!r}, "
                f"the agent speaks CRI {SUPPORTED_API} (runtime.v1)"
            )
        client.runtime_name = version.runtime_name
        return client

    def close(self) -> None:
        self._channel.close()

    def call(self, method: Any, request: Any, timeout: float = DEFAULT_TIMEOUT_S) -> Any:
        """One unary call with a deadline; gRPC errors become CRIError."""
        try:
            return method(request, timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            name = code.name if code is not None else "UNKNOWN"
            raise CRIError(f"rpc error: code = {name} desc = {details}", code) from None

    def version(self, timeout: float = DEFAULT_TIMEOUT_S) -> cri.VersionResponse:
        return self.call(self.runtime.Version, cri.VersionRequest(version="0.1.0"), timeout)  # type: ignore[no-any-return]
