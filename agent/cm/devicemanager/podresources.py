"""The PodResources v1 service (List, GetAllocatableResources, Get) over the device manager's state.

Tools written for the kubelet's pod-resources socket work against it. Like the kubelet, List and Get cover
every active pod when the agent tells the manager which pods are active (`active_pods`): a pod without
devices is listed with its containers and no devices. Without that, the pods holding devices are listed.
Device entries follow the kubelet's shapes: in List/Get one ContainerDevices per resource and NUMA node
(devices without topology in one entry without topology), in GetAllocatableResources one entry per healthy
device and NUMA node. Container `cpu_ids` come from the `KUBENODE_CPUSET` env our CPU plugin returns.
A container's dynamic resources (DRA claims) come from `dynamic`, the DRA manager's answer
(agent/cm/dra/podresources.py), where the agent has one. Not served: memory, the rate limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import grpc

from agent.cm.devicemanager.records import ContainerAllocation, PodInfo, ResourceStatus
from agent.cm.devicemanager.registration import bind_unix
from kubenode.api.podresources.v1 import api_pb2, api_pb2_grpc
from kubenode.deviceapi import clip_message


class PodResourcesSource(Protocol):
    active_pods: Callable[[], Iterable[PodInfo]] | None

    def allocations(self) -> list[ContainerAllocation]: ...

    def resources(self) -> list[ResourceStatus]: ...


# (pod UID, container name) -> the container's DynamicResource entries
DynamicLookup = Callable[[str, str], list[api_pb2.DynamicResource]]


class PodResourcesServicer(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, source: PodResourcesSource, dynamic: DynamicLookup | None = None) -> None:
        self._source = source
        self._dynamic = dynamic

    def List(
        self, request: api_pb2.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ListPodResourcesResponse:
        return api_pb2.ListPodResourcesResponse(pod_resources=self._pods())

    def Get(
        self, request: api_pb2.GetPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.GetPodResourcesResponse:
        for pod in self._pods():
            if pod.name == request.pod_name and pod.namespace == request.pod_namespace:
                return api_pb2.GetPodResourcesResponse(pod_resources=pod)
        context.abort(
            grpc.StatusCode.NOT_FOUND,
            # Names are cut: a huge one echoed whole would overflow the status trailer.
            clip_message(f"pod {request.pod_name[:253]} in namespace {request.pod_namespace[:63]} not found"),
        )
        raise AssertionError("abort returns only by raising")

    def GetAllocatableResources(
        self, request: api_pb2.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.AllocatableResourcesResponse:
        devices = [
            entry
            for resource in self._source.resources()
            for device in resource.devices
            if device.healthy
            for entry in _per_node(resource.name, [device.id], sorted(device.numa_nodes))
        ]
        return api_pb2.AllocatableResourcesResponse(devices=devices)

    def _pods(self) -> list[api_pb2.PodResources]:
        # The agent's pods are read before the allocations, never under the device manager's lock.
        active = self._source.active_pods
        if active is None:
            return list(_allocated_pods(self._source.allocations()).values())
        return _active_pods(active(), self._source.allocations(), self._dynamic)


def _active_pods(
    pods: Iterable[PodInfo], allocations: Iterable[ContainerAllocation], dynamic: DynamicLookup | None = None
) -> list[api_pb2.PodResources]:
    """Every active pod with each of its containers, devices or not (the kubelet's List)."""
    held = {(alloc.pod.uid, alloc.container): alloc for alloc in allocations}
    result = []
    for pod in pods:
        entry = api_pb2.PodResources(name=pod.name, namespace=pod.namespace)
        for container in pod.containers:
            alloc = held.get((pod.uid, container))
            resources = (
                api_pb2.ContainerResources(name=container) if alloc is None else _container_resources(alloc)
            )
            if dynamic is not None:
                resources.dynamic_resources.extend(dynamic(pod.uid, container))
            entry.containers.append(resources)
        result.append(entry)
    return result


def _container_resources(alloc: ContainerAllocation) -> api_pb2.ContainerResources:
    return api_pb2.ContainerResources(
        name=alloc.container, devices=_container_devices(alloc), cpu_ids=list(alloc.cpu_ids)
    )


def _allocated_pods(allocations: Iterable[ContainerAllocation]) -> dict[str, api_pb2.PodResources]:
    pods: dict[str, api_pb2.PodResources] = {}
    for alloc in allocations:
        pod = pods.get(alloc.pod.uid)
        if pod is None:
            pod = pods[alloc.pod.uid] = api_pb2.PodResources(
                name=alloc.pod.name, namespace=alloc.pod.namespace
            )
        pod.containers.append(_container_resources(alloc))
    return pods


def _container_devices(alloc: ContainerAllocation) -> list[api_pb2.ContainerDevices]:
    entries: list[api_pb2.ContainerDevices] = []
    for resource, ids in sorted(alloc.devices.items()):
        by_node: dict[int | None, list[str]] = {}
        for device_id in ids:
            nodes = alloc.numa.get(resource, {}).get(device_id, ())
            for node in nodes or (None,):
                by_node.setdefault(node, []).append(device_id)
        for node, node_ids in by_node.items():
            entries.extend(_per_node(resource, node_ids, [] if node is None else [node]))
    return entries


def _per_node(resource: str, ids: list[str], nodes: list[int]) -> list[api_pb2.ContainerDevices]:
    if not nodes:
        return [api_pb2.ContainerDevices(resource_name=resource, device_ids=ids)]
    return [
        api_pb2.ContainerDevices(
            resource_name=resource,
            device_ids=ids,
            topology=api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=node)]),
        )
        for node in nodes
    ]


def serve_podresources(
    source: PodResourcesSource, socket_path: Path, dynamic: DynamicLookup | None = None
) -> grpc.Server:
    """Serve PodResourcesLister on `socket_path` (a stale socket there is replaced) and return the server."""
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    server = grpc.server(ThreadPoolExecutor(max_workers=4, thread_name_prefix="podresources"))
    # The generated gRPC module has no annotations.
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(PodResourcesServicer(source, dynamic), server)
    bind_unix(server, socket_path)
    server.start()
    return server
