"""PodResources v1 on the manager's own socket: List, GetAllocatableResources, Get."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from agent.cm.devicemanager import DeviceManager, PodInfo, PodRef
from kubenode.api.podresources.v1 import api_pb2, api_pb2_grpc
from kubenode.cpuset import format_cpuset
from tests.conformance.fake_device_plugin import FakeDevice, FakePlugin


def test_list_get_and_allocatable_follow_the_kubelet_shapes(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin], plugin_dir: Path
) -> None:
    socket_path = plugin_dir / "pod-resources.sock"
    manager = make_manager(podresources_socket=socket_path)
    cpu = make_plugin(
        resource="kubenode.io/cpu",
        devices=[FakeDevice(str(i), numa=(i // 2,)) for i in range(4)],
        extra_envs=lambda ids: {"KUBENODE_CPUSET": format_cpuset(int(i) for i in ids)},
    )
    gpu = make_plugin(resource="example.com/gpu", devices=[FakeDevice("g0"), FakeDevice("g1", healthy=False)])
    for plugin in (cpu, gpu):
        plugin.register()
        assert manager.wait_for_resource(plugin.resource, 5)
    manager.allocate(PodRef("u1", "ns", "web"), "app", {"kubenode.io/cpu": 3, "example.com/gpu": 1})

    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        stub = api_pb2_grpc.PodResourcesListerStub(channel)
        listed = stub.List(api_pb2.ListPodResourcesRequest(), timeout=5)
        got = stub.Get(api_pb2.GetPodResourcesRequest(pod_name="web", pod_namespace="ns"), timeout=5)
        allocatable = stub.GetAllocatableResources(api_pb2.AllocatableResourcesRequest(), timeout=5)
        with pytest.raises(grpc.RpcError) as missing:
            stub.Get(api_pb2.GetPodResourcesRequest(pod_name="nope", pod_namespace="ns"), timeout=5)

    (pod,) = listed.pod_resources
    assert got.pod_resources == pod
    assert (pod.name, pod.namespace) == ("web", "ns")
    (container,) = pod.containers
    assert container.name == "app" and list(container.cpu_ids) == [0, 1, 2]
    shapes = [
        (d.resource_name, list(d.device_ids), [n.ID for n in d.topology.nodes]) for d in container.devices
    ]
    assert shapes == [
        ("example.com/gpu", ["g0"], []),
        ("kubenode.io/cpu", ["0", "1"], [0]),
        ("kubenode.io/cpu", ["2"], [1]),
    ]
    free = sorted((d.resource_name, list(d.device_ids)) for d in allocatable.devices)
    assert free == [("example.com/gpu", ["g0"])] + [("kubenode.io/cpu", [str(i)]) for i in range(4)]
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_with_active_pods_list_and_get_cover_every_active_pod_devices_or_not(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin], plugin_dir: Path
) -> None:
    socket_path = plugin_dir / "pod-resources.sock"
    active = [
        PodInfo("u1", "ns", "web", ("sidecar", "app")),
        PodInfo("u2", "ns", "plain", ("main",)),
    ]
    manager = make_manager(podresources_socket=socket_path, active_pods=lambda: active)
    gpu = make_plugin(resource="example.com/gpu", devices=[FakeDevice("g0"), FakeDevice("g1")])
    gpu.register()
    assert manager.wait_for_resource("example.com/gpu", 5)
    manager.allocate(PodRef("u1", "ns", "web"), "app", {"example.com/gpu": 1})
    # Devices still held by a pod that is no longer active are not listed (the kubelet lists active pods).
    manager.allocate(PodRef("u3", "ns", "gone"), "main", {"example.com/gpu": 1})

    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        stub = api_pb2_grpc.PodResourcesListerStub(channel)
        listed = stub.List(api_pb2.ListPodResourcesRequest(), timeout=5)
        plain = stub.Get(api_pb2.GetPodResourcesRequest(pod_name="plain", pod_namespace="ns"), timeout=5)
        with pytest.raises(grpc.RpcError) as gone:
            stub.Get(api_pb2.GetPodResourcesRequest(pod_name="gone", pod_namespace="ns"), timeout=5)

    def shape(pod: api_pb2.PodResources) -> list[tuple[str, list[str]]]:
        return [(c.name, [i for d in c.devices for i in d.device_ids]) for c in pod.containers]

    assert [(p.namespace, p.name) for p in listed.pod_resources] == [("ns", "web"), ("ns", "plain")]
    web, listed_plain = listed.pod_resources
    (web_gpu,) = (a.devices["example.com/gpu"] for a in manager.allocations() if a.pod.uid == "u1")
    assert shape(web) == [("sidecar", []), ("app", list(web_gpu))]
    assert shape(listed_plain) == [("main", [])] and plain.pod_resources == listed_plain
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
