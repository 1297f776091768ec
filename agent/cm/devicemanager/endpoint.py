"""The kubelet's client of one device plugin: dial, options, the ListAndWatch stream and the unary calls."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.deviceapi import DIAL_TIMEOUT_S, PRE_START_TIMEOUT_S
from kubenode.deviceplugin_client import dial, plugin_stub, rpc_error_text

log = logging.getLogger(__name__)

# The kubelet sets no deadline on Allocate, GetPreferredAllocation and GetDevicePluginOptions; a daemon that
# must keep serving everything else cannot wait forever, so these get a generous one.
DEFAULT_RPC_TIMEOUT_S = 60.0
# The dial-back at Register asks for the plugin's options with its own deadline: a plugin that never answers
# costs its own Register this long, and nobody else's.
OPTIONS_TIMEOUT_S = 10.0


class PluginEndpoint:
    """A connected plugin for one resource; `close()` ends its stream and channel."""

    def __init__(
        self,
        resource: str,
        socket_path: Path,
        channel: grpc.Channel,
        options: api_pb2.DevicePluginOptions,
        rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
    ) -> None:
        self.resource = resource
        self.socket_path = socket_path
        self.options = options
        self.rpc_timeout = rpc_timeout
        self._channel = channel
        self._stub = plugin_stub(channel)
        self._stream: grpc.Future | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    @classmethod
    def connect(
        cls,
        resource: str,
        socket_path: Path,
        rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
        dial_timeout: float = DIAL_TIMEOUT_S,
    ) -> PluginEndpoint:
        """Dial (10 s) and fetch the options the manager will use, as the kubelet's PluginConnected does."""
        channel = dial(socket_path, dial_timeout)
        try:
            options = plugin_stub(channel).GetDevicePluginOptions(
                api_pb2.Empty(), timeout=min(rpc_timeout, OPTIONS_TIMEOUT_S)
            )
        except grpc.RpcError as err:
            channel.close()
            raise ConnectionError(
                f"GetDevicePluginOptions on {socket_path} failed: {rpc_error_text(err)}"
            ) from None
        return cls(resource, socket_path, channel, options, rpc_timeout)

    def watch(
        self,
        on_update: Callable[[PluginEndpoint, api_pb2.ListAndWatchResponse], None],
        on_end: Callable[[PluginEndpoint], None],
    ) -> None:
        """Open ListAndWatch now and consume it on a thread; `on_end` runs once when the stream ends."""
        stream = self._stub.ListAndWatch(api_pb2.Empty())
        self._stream = stream

        def consume() -> None:
            try:
                for response in stream:
                    on_update(self, response)
            except grpc.RpcError as err:
                if not self._closed.is_set():
                    log.warning(
                        "ListAndWatch of %s at %s ended: %s",
                        self.resource,
                        self.socket_path,
                        rpc_error_text(err),
                    )
            finally:
                on_end(self)

        self._thread = threading.Thread(target=consume, name=f"listandwatch-{self.resource}", daemon=True)
        self._thread.start()

    def allocate(self, device_ids: Sequence[str]) -> api_pb2.ContainerAllocateResponse:
        """Allocate with exactly one container request, as the kubelet does; only response [0] is used."""
        request = api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=device_ids)]
        )
        response = self._stub.Allocate(request, timeout=self.rpc_timeout)
        if not response.container_responses:
            raise ValueError("plugin answered Allocate with no container response")
        result: api_pb2.ContainerAllocateResponse = response.container_responses[0]
        return result

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        """GetPreferredAllocation with one container request; returns the plugin's IDs unfiltered."""
        request = api_pb2.PreferredAllocationRequest(
            container_requests=[
                api_pb2.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=must_include, allocation_size=size
                )
            ]
        )
        response = self._stub.GetPreferredAllocation(request, timeout=self.rpc_timeout)
        if not response.container_responses:
            return []
        return list(response.container_responses[0].deviceIDs)

    def pre_start(self, device_ids: Sequence[str], timeout: float = PRE_START_TIMEOUT_S) -> None:
        self._stub.PreStartContainer(
            api_pb2.PreStartContainerRequest(devices_ids=device_ids), timeout=timeout
        )

    def close(self) -> None:
        """Cancel the stream and close the channel; the stream thread then reports the end."""
        self._closed.set()
        if self._stream is not None:
            self._stream.cancel()
        self._channel.close()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
