"""The DevicePlugin gRPC service for one resource (Device Plugin API v1beta1)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import grpc

from deviceplugin.backend import ContainerAllocation, Device
from deviceplugin.devicestate import DeviceState, RequestError
from kubenode.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubenode.deviceapi import HEALTHY, UNHEALTHY

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


class DevicePluginService(api_pb2_grpc.DevicePluginServicer):
    def __init__(self, resource_name: str, state: DeviceState) -> None:
        self.resource_name = resource_name
        self.state = state

    def GetDevicePluginOptions(self, request: api_pb2.Empty, context: Any) -> api_pb2.DevicePluginOptions:
        return PLUGIN_OPTIONS

    def ListAndWatch(self, request: api_pb2.Empty, context: Any) -> Iterator[api_pb2.ListAndWatchResponse]:
        ended = threading.Event()

        def on_end() -> None:
            ended.set()
            self.state.wake_all()

        # Fires on client cancel, deadline or server stop: the wait below must not outlive the stream.
        context.add_callback(on_end)
        generation, devices = self.state.snapshot()
        while True:
            yield api_pb2.ListAndWatchResponse(devices=[device_message(d) for d in devices])
            change = self.state.wait_change(generation, ended.is_set)
            if change is None:
                return
            generation, devices = change

    def Allocate(self, request: api_pb2.AllocateRequest, context: Any) -> api_pb2.AllocateResponse:
        def answer(c: api_pb2.ContainerAllocateRequest) -> api_pb2.ContainerAllocateResponse:
            return allocation_message(self.state.allocate(c.devices_ids))

        responses = self._per_container("Allocate", request.container_requests, answer, context)
        return api_pb2.AllocateResponse(container_responses=responses)

    def GetPreferredAllocation(
        self, request: api_pb2.PreferredAllocationRequest, context: Any
    ) -> api_pb2.PreferredAllocationResponse:
        def answer(
            c: api_pb2.ContainerPreferredAllocationRequest,
        ) -> api_pb2.ContainerPreferredAllocationResponse:
            ids = self.state.preferred(c.available_deviceIDs, c.must_include_deviceIDs, c.allocation_size)
            return api_pb2.ContainerPreferredAllocationResponse(deviceIDs=ids)

        responses = self._per_container("GetPreferredAllocation", request.container_requests, answer, context)
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    def _per_container(
        self, what: str, requests: Sequence[Request], answer: Callable[[Request], Response], context: Any
    ) -> list[Response]:
        """Answer each container request; a bad one fails the call with INVALID_ARGUMENT, naming it."""
        try:
            if not requests:
                raise RequestError(f"{what}: no container requests")
            return [answer(r) for r in requests]
        except RequestError as exc:
            log.info("%s: rejected: %s", self.resource_name, exc)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self.resource_name}: {exc}")
            raise AssertionError("context.abort returned") from exc  # it always raises

    def PreStartContainer(
        self, request: api_pb2.PreStartContainerRequest, context: Any
    ) -> api_pb2.PreStartContainerResponse:
        return api_pb2.PreStartContainerResponse()
