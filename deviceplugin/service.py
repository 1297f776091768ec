"""The DevicePlugin gRPC service for one resource (Device Plugin API v1beta1), on grpc.aio.

A ListAndWatch stream is a coroutine waiting on an asyncio.Event, so open streams cost no
thread and never starve the unary calls; `StreamHub` wakes them when the devices change
(one thread per resource waits on the device state and pokes the loop). Streams are
capped per peer (`max_streams_per_peer`); one over the cap is refused with
RESOURCE_EXHAUSTED. gRPC names every unix-socket client just "unix:", so on the
plugin's socket (root-only, in the kubelet's directory) the cap bounds all its
streams together: it is a memory bound, far above the kubelet's one stream. The unary
calls run their (short, possibly blocking) work on the server's bounded executor. Error
messages quote IDs cut to `MAX_ECHOED_ID` characters, so a huge ID cannot overflow the
status trailer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import grpc

from deviceplugin.backend import ContainerAllocation, Device
from deviceplugin.devicestate import DeviceState, RequestError
from deviceplugin.metrics import NO_METRICS, PluginRecorder
from kubenode.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubenode.deviceapi import HEALTHY, UNHEALTHY, clip_message

MAX_STREAMS_PER_PEER = 1024  # far above the kubelet's one stream per registration; bounds memory

log = logging.getLogger(__name__)

Request = TypeVar("Request")
Response = TypeVar("Response")


# What we tell the kubelet, both in GetDevicePluginOptions and in RegisterRequest.options.
PLUGIN_OPTIONS = api_pb2.DevicePluginOptions(
    pre_start_required=False, get_preferred_allocation_available=True
)


def device_message(device: Device) -> api_pb2.Device:
    message = api_pb2.Device(ID=device.id, health=HEALTHY if device.healthy else UNHEALTHY)
    if device.numa_nodes:
        message.topology.nodes.extend(api_pb2.NUMANode(ID=n) for n in device.numa_nodes)
    return message


def allocation_message(allocation: ContainerAllocation) -> api_pb2.ContainerAllocateResponse:
    return api_pb2.ContainerAllocateResponse(
        envs=allocation.envs,
        annotations=allocation.annotations,
        devices=[
            api_pb2.DeviceSpec(
                container_path=d.container_path, host_path=d.host_path, permissions=d.permissions
            )
            for d in allocation.device_nodes
        ],
        mounts=[
            api_pb2.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in allocation.mounts
        ],
        cdi_devices=[api_pb2.CDIDevice(name=name) for name in allocation.cdi_devices],
    )


class StreamHub:
    """Wakes every ListAndWatch coroutine of one resource when its device state changes."""

    def __init__(self, state: DeviceState, loop: asyncio.AbstractEventLoop) -> None:
        self.state = state
        self.loop = loop
        self._waiters: set[asyncio.Event] = set()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="listandwatch-hub", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        generation, _ = self.state.snapshot()
        while not self._stopping.is_set():
            change = self.state.wait_change(generation, self._stopping.is_set)
            if change is None:
                return
            generation = change[0]
            try:
                self.loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # the loop is closed: the server is gone
                return

    def _wake(self) -> None:
        for event in self._waiters:
            event.set()

    def subscribe(self) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters.add(event)
        return event

    def unsubscribe(self, event: asyncio.Event) -> None:
        self._waiters.discard(event)

    def stop(self) -> None:
        self._stopping.set()
        self.state.wake_all()
        self._thread.join(5)


class DevicePluginService(api_pb2_grpc.DevicePluginServicer):
    def __init__(
        self,
        resource_name: str,
        state: DeviceState,
        hub: StreamHub,
        run_blocking: Callable[..., Any],
        *,
        max_streams_per_peer: int = MAX_STREAMS_PER_PEER,
        recorder: PluginRecorder = NO_METRICS,
    ) -> None:
        self.resource_name = resource_name
        self.state = state
        self._hub = hub
        self._run_blocking = run_blocking
        self.max_streams_per_peer = max_streams_per_peer
        self._recorder = recorder
        self._streams: Counter[str] = Counter()

    def open_streams(self) -> int:
        """ListAndWatch streams open now (read from the metrics thread: a snapshot is enough)."""
        return sum(self._streams.copy().values())

    async def GetDevicePluginOptions(
        self, request: api_pb2.Empty, context: Any
    ) -> api_pb2.DevicePluginOptions:
        return PLUGIN_OPTIONS

    async def ListAndWatch(
        self, request: api_pb2.Empty, context: Any
    ) -> AsyncIterator[api_pb2.ListAndWatchResponse]:
        peer = context.peer()
        if self._streams[peer] >= self.max_streams_per_peer:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self.resource_name}: at most {self.max_streams_per_peer} ListAndWatch streams per peer",
            )
        self._streams[peer] += 1
        changed = self._hub.subscribe()
        try:
            generation = -1
            while True:
                changed.clear()
                now, devices = self.state.snapshot()
                if now != generation:
                    generation = now
                    yield api_pb2.ListAndWatchResponse(devices=[device_message(d) for d in devices])
                await changed.wait()  # cancelled when the client goes away or the server stops
        finally:
            self._hub.unsubscribe(changed)
            self._streams[peer] -= 1
            if self._streams[peer] <= 0:
                del self._streams[peer]

    async def Allocate(self, request: api_pb2.AllocateRequest, context: Any) -> api_pb2.AllocateResponse:
        def answer(c: api_pb2.ContainerAllocateRequest) -> api_pb2.ContainerAllocateResponse:
            return allocation_message(self.state.allocate(c.devices_ids))

        started, ok = time.monotonic(), False
        try:
            responses = await self._per_container("Allocate", request.container_requests, answer, context)
            ok = True
        finally:  # a rejected request leaves by context.abort's exception: counted as an error
            self._recorder.allocation(self.resource_name, ok, time.monotonic() - started)
        return api_pb2.AllocateResponse(container_responses=responses)

    async def GetPreferredAllocation(
        self, request: api_pb2.PreferredAllocationRequest, context: Any
    ) -> api_pb2.PreferredAllocationResponse:
        def answer(
            c: api_pb2.ContainerPreferredAllocationRequest,
        ) -> api_pb2.ContainerPreferredAllocationResponse:
            ids = self.state.preferred(c.available_deviceIDs, c.must_include_deviceIDs, c.allocation_size)
            return api_pb2.ContainerPreferredAllocationResponse(deviceIDs=ids)

        responses = await self._per_container(
            "GetPreferredAllocation", request.container_requests, answer, context
        )
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    async def _per_container(
        self, what: str, requests: Sequence[Request], answer: Callable[[Request], Response], context: Any
    ) -> list[Response]:
        """Answer each container request; a bad one fails the call with INVALID_ARGUMENT, naming it."""

        def answer_all() -> list[Response] | str:
            try:
                if not requests:
                    raise RequestError(f"{what}: no container requests")
                return [answer(r) for r in requests]
            except RequestError as exc:
                return clip_message(f"{self.resource_name}: {exc}")

        result: list[Response] | str
        if self.state.backend.allocate_blocks:
            result = await self._run_blocking(answer_all)
        else:
            result = answer_all()  # memory only: answered on the loop, no executor round trip
        if isinstance(result, str):
            log.info("%s: rejected: %s", self.resource_name, result)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, result)
            raise AssertionError("context.abort returned")  # it always raises
        return result

    async def PreStartContainer(
        self, request: api_pb2.PreStartContainerRequest, context: Any
    ) -> api_pb2.PreStartContainerResponse:
        return api_pb2.PreStartContainerResponse()
