"""One registered resource under test: its Register call, a client of its endpoint, cached observations.

The endpoint is dialled once. A dial that fails is remembered, and every later check that needs the
endpoint fails at once with the same reason: a plugin whose socket is gone (the harness deletes the
dir's sockets at start, as a kubelet does) would otherwise cost the kubelet's 10 s dial per check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from agent.cm.devicemanager import RegistrationEvent
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.deviceapi import DIAL_TIMEOUT_S, HEALTHY, PRE_START_TIMEOUT_S, is_plugin_endpoint
from kubenode.deviceplugin_client import dial, plugin_stub, rpc_error_text


class Fail(Exception):
    """The check failed; the message says why."""


class Skip(Exception):
    """The check does not apply; the message says why."""


@dataclass(frozen=True)
class Limits:
    """Deadlines of a run, in seconds (the kubelet's where it has one)."""

    register: float = 30.0
    settle: float = 1.0
    dial: float = DIAL_TIMEOUT_S
    first_message: float = 5.0
    rpc: float = 10.0
    pre_start: float = PRE_START_TIMEOUT_S
    restart: float = 30.0
    stop_grace: float = 5.0  # SIGTERM to SIGKILL for a plugin started with --plugin-cmd


@dataclass
class FirstList:
    seconds: float
    devices: list[api_pb2.Device]


class Target:
    def __init__(self, event: RegistrationEvent, kubelet_dir: Path, limits: Limits) -> None:
        self.event = event
        self.resource = event.resource_name
        self.socket_path = kubelet_dir / event.endpoint
        self.limits = limits
        self._channel: grpc.Channel | None = None
        self._stub: Any = None
        self._options: api_pb2.DevicePluginOptions | None = None
        self._first: FirstList | None = None
        self._sample: api_pb2.ContainerAllocateResponse | None = None
        self._preferred: tuple[list[str], list[str], int, list[str]] | None = None
        self._dial_error: str | None = None

    def stub(self) -> Any:
        if self._dial_error is not None:
            raise Fail(f"{self._dial_error} (dialled once; not retried)")
        if self._stub is None:
            if not is_plugin_endpoint(self.event.endpoint):
                raise Skip(f"endpoint {self.event.endpoint!r} is not a socket in the dir")
            # No shortcut for a socket that is not there yet: the kubelet's blocking dial waits for it.
            try:
                self._channel = dial(self.socket_path, self.limits.dial)
            except TimeoutError as err:
                self._dial_error = str(err)
                raise Fail(self._dial_error) from None
            self._stub = plugin_stub(self._channel)
        return self._stub

    def require_advertised(self, advertised: bool, call: str, what: str) -> None:
        """Skip a check of an optional call the kubelet would never make: its Register was rejected, or did
        not advertise it (the kubelet decides from RegisterRequest.options, not GetDevicePluginOptions)."""
        if not self.event.accepted:
            raise Skip(f"Register was rejected ({self.event.error}); the kubelet never calls {call}")
        if not advertised:
            raise Skip(f"{call} is not {what} by the plugin")

    def call(self, method: str, request: object, timeout: float | None = None) -> Any:
        """A unary call; a gRPC error becomes Fail naming the method."""
        try:
            return getattr(self.stub(), method)(request, timeout=timeout or self.limits.rpc)
        except grpc.RpcError as err:
            raise Fail(f"{method} failed: {rpc_error_text(err)}") from None

    def options(self) -> api_pb2.DevicePluginOptions:
        if self._options is None:
            self._options = self.call("GetDevicePluginOptions", api_pb2.Empty())
        return self._options

    def first_list(self) -> FirstList:
        """The first ListAndWatch message of a fresh stream (then the stream is closed)."""
        if self._first is None:
            self._first = self.read_first_message()
        return self._first

    def read_first_message(self) -> FirstList:
        started = time.monotonic()
        stream = self.stub().ListAndWatch(api_pb2.Empty(), timeout=self.limits.first_message)
        try:
            message = next(stream)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise Fail(f"no ListAndWatch message within {self.limits.first_message:g} s") from None
            raise Fail(f"ListAndWatch failed: {rpc_error_text(err)}") from None
        except StopIteration:
            raise Fail("ListAndWatch ended without sending a message") from None
        finally:
            stream.cancel()
        return FirstList(time.monotonic() - started, list(message.devices))

    def healthy_ids(self) -> list[str]:
        ids = [d.ID for d in self.first_list().devices if d.health == HEALTHY]
        if not ids:
            raise Skip("the plugin advertises no healthy device")
        return ids

    def allocate(self, *requests: list[str]) -> api_pb2.AllocateResponse:
        request = api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids) for ids in requests]
        )
        response: api_pb2.AllocateResponse = self.call("Allocate", request)
        return response

    def sample_response(self) -> api_pb2.ContainerAllocateResponse:
        """The answer to Allocate of every healthy device in one container request."""
        if self._sample is None:
            response = self.allocate(self.healthy_ids())
            if not response.container_responses:
                raise Fail("Allocate answered no container response")
            self._sample = response.container_responses[0]
        return self._sample

    def preferred(self) -> tuple[list[str], list[str], int, list[str]]:
        """(available, must_include, size, answer) of one GetPreferredAllocation call, if advertised."""
        self.require_advertised(
            self.event.request_preferred_allocation, "GetPreferredAllocation", "advertised in Register"
        )
        if self._preferred is None:
            available = self.healthy_ids()
            must, size = available[:1], min(2, len(available))
            request = api_pb2.PreferredAllocationRequest(
                container_requests=[
                    api_pb2.ContainerPreferredAllocationRequest(
                        available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                    )
                ]
            )
            response = self.call("GetPreferredAllocation", request)
            if len(response.container_responses) != 1:
                raise Fail(f"{len(response.container_responses)} container responses for 1 request")
            self._preferred = (available, must, size, list(response.container_responses[0].deviceIDs))
        return self._preferred

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
            self._stub = None
