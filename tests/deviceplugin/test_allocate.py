"""Allocate and GetPreferredAllocation over the plugin socket: answers, and INVALID_ARGUMENT for bad input."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from agent.cm.devicemanager import PodRef
from deviceplugin.backends.static import StaticBackend
from deviceplugin.manager import PluginManager
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from tests.deviceplugin.conftest import Kubelet
from tests.deviceplugin.support import plugin_client


@pytest.fixture
def plugin(kubelet: Kubelet, run_plugin: Callable[..., PluginManager]) -> PluginManager:
    manager = run_plugin()
    assert manager.all_registered.wait(5)
    return manager


@pytest.fixture
def dongle(plugin: PluginManager) -> Iterator[Any]:
    with plugin_client(plugin.resource("example.com/dongle").endpoint.socket_path) as stub:
        yield stub


def allocate(stub: Any, *ids: str) -> Any:
    request = api_pb2.AllocateRequest(container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=ids)])
    return stub.Allocate(request, timeout=5)


def preferred(stub: Any, available: list[str], must: list[str], size: int) -> list[str]:
    request = api_pb2.PreferredAllocationRequest(
        container_requests=[
            api_pb2.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
            )
        ]
    )
    return list(stub.GetPreferredAllocation(request, timeout=5).container_responses[0].deviceIDs)


def test_allocate_returns_env_device_nodes_and_mounts(dongle: Any, plugin: PluginManager) -> None:
    answer = allocate(dongle, "dongle-1").container_responses[0]
    assert dict(answer.envs) == {"DONGLE_SERIAL": "A1"}
    assert [(d.host_path, d.container_path, d.permissions) for d in answer.devices] == [
        ("/dev/zero", "/dev/dongle1", "r")
    ]
    with plugin_client(plugin.resource("example.com/accel").endpoint.socket_path) as accel:
        shared = allocate(accel, "accel-1::0", "accel-1::1").container_responses[0]
    assert [(m.host_path, m.container_path, m.read_only) for m in shared.mounts] == [
        ("/etc/hostname", "/run/accel/1", True)
    ]


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["nope-7"], "unknown device 'nope-7'"),
        (["dongle-0", "dongle-0"], "device 'dongle-0' requested twice"),
        ([], "empty device list"),
    ],
)
def test_allocate_rejects_bad_ids_and_keeps_serving(dongle: Any, ids: list[str], message: str) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        allocate(dongle, *ids)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in caught.value.details()
    assert allocate(dongle, "dongle-0").container_responses[0].envs["DONGLE_SERIAL"] == "A0"


def test_unhealthy_device_is_rejected_by_both_calls(dongle: Any, plugin: PluginManager) -> None:
    backend = plugin.resource("example.com/dongle").backend
    assert isinstance(backend, StaticBackend)
    backend.set_health("dongle-1", False)
    for call in (
        lambda: allocate(dongle, "dongle-1"),
        lambda: preferred(dongle, ["dongle-0", "dongle-1"], [], 1),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "'dongle-1' is unhealthy" in caught.value.details()


def test_empty_allocate_request_is_invalid(dongle: Any) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        dongle.Allocate(api_pb2.AllocateRequest(), timeout=5)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("available", "must", "size", "message"),
    [
        (["dongle-0", "ghost"], [], 1, "unknown device 'ghost'"),
        (["dongle-0", "dongle-0"], [], 1, "'dongle-0' requested twice"),
        ([], [], 1, "empty device list"),
        (["dongle-0"], [], 0, "allocation_size 0"),
        (["dongle-0"], ["dongle-1"], 1, "must-include device 'dongle-1'"),
    ],
)
def test_preferred_rejects_bad_requests(
    dongle: Any, available: list[str], must: list[str], size: int, message: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        preferred(dongle, available, must, size)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in caught.value.details()


def test_preferred_keeps_must_include_and_packs_numa(plugin: PluginManager) -> None:
    with plugin_client(plugin.resource("example.com/accel").endpoint.socket_path) as accel:
        everything = ["accel-0::0", "accel-0::1", "accel-1::0", "accel-1::1"]
        # Replicas spread over devices (least shared first), must-include kept.
        assert preferred(accel, everything, [], 2) == ["accel-0::0", "accel-1::0"]
        assert preferred(accel, everything, ["accel-1::1"], 2) == ["accel-1::1", "accel-0::0"]
        assert (
            preferred(accel, everything, [], 9)
            == everything[:1] + everything[2:3] + everything[1:2] + everything[3:]
        )


def test_kubelet_allocation_end_to_end(kubelet: Kubelet, plugin: PluginManager) -> None:
    assert kubelet.manager.wait_for_resource("example.com/dongle", 5)
    options = kubelet.manager.allocate(PodRef("uid-1", "default", "p"), "main", {"example.com/dongle": 2})
    assert options.envs["DONGLE_SERIAL"] in ("A0", "A1")
    assert {d.container_path for d in options.devices} == {"/dev/dongle0", "/dev/dongle1"}
