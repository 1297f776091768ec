"""gRPC servers that cannot be starved: 500 idle ListAndWatch streams against the device plugin, 50 plugins
whose GetDevicePluginOptions never returns against the Registration server, and huge IDs that must not
overflow a status trailer (issue 14 items 8, 9 and 13)."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.cm.devicemanager import DeviceManager
from deviceplugin.backends import make_backend
from deviceplugin.config import load_config
from deviceplugin.devicestate import DeviceState
from deviceplugin.endpoint import ResourceEndpoint
from kubenode.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubenode.api.podresources.v1 import api_pb2 as podresources_pb2
from kubenode.api.podresources.v1 import api_pb2_grpc as podresources_pb2_grpc
from tests.conformance.fake_device_plugin import FakeDevice, FakePlugin

CONFIGS = Path(__file__).parent.parent / "configs"
ALLOCATE_GOAL_S = 0.002  # the README's p99 goal on a quiet machine


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-hg-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_endpoint(plugin_dir: Path) -> Iterator[Any]:
    made: list[ResourceEndpoint] = []

    def make(**kwargs: Any) -> ResourceEndpoint:
        config = load_config(CONFIGS / "static.yaml").resources[0]  # example.com/dongle: dongle-0, dongle-1
        state = DeviceState(make_backend(config, str(plugin_dir)))
        endpoint = ResourceEndpoint(config.name, f"dongle-{len(made)}.sock", state, str(plugin_dir), **kwargs)
        endpoint.serve()
        made.append(endpoint)
        return endpoint

    yield make
    for endpoint in made:
        endpoint.stop()


def test_500_idle_streams_leave_allocate_answering(make_endpoint: Any) -> None:
    endpoint = make_endpoint()
    channels = [grpc.insecure_channel(f"unix://{endpoint.socket_path}") for _ in range(5)]
    streams = []
    try:
        for i in range(500):
            stream = api_pb2_grpc.DevicePluginStub(channels[i % 5]).ListAndWatch(api_pb2.Empty(), timeout=60)
            next(stream)  # the first device list: the stream is open (this blocked from the 13th on)
            streams.append(stream)
        stub = api_pb2_grpc.DevicePluginStub(channels[0])
        request = api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["dongle-0"])]
        )
        latencies = []
        for _ in range(300):
            started = time.perf_counter()
            response = stub.Allocate(request, timeout=5)
            latencies.append(time.perf_counter() - started)
            assert response.container_responses[0].envs["DONGLE_SERIAL"] == "A0"
        assert stub.GetDevicePluginOptions(api_pb2.Empty(), timeout=5).get_preferred_allocation_available
    finally:
        for stream in streams:
            stream.cancel()
        for channel in channels:
            channel.close()
    latencies.sort()
    p50, p99 = statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]
    print(
        f"Allocate with 500 ListAndWatch streams open: p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, "
        f"max {latencies[-1] * 1000:.2f} ms (goal p99 <= {ALLOCATE_GOAL_S * 1000:.0f} ms on a quiet machine)"
    )
    # The goal is for a quiet machine; the test machine is shared, so the bound here is generous.
    assert p99 < 0.25, f"p99 {p99 * 1000:.1f} ms"


def test_streams_are_capped_per_peer(make_endpoint: Any) -> None:
    endpoint = make_endpoint(max_streams_per_peer=3)
    with grpc.insecure_channel(f"unix://{endpoint.socket_path}") as channel:
        stub = api_pb2_grpc.DevicePluginStub(channel)
        streams = [stub.ListAndWatch(api_pb2.Empty(), timeout=30) for _ in range(3)]
        for stream in streams:
            next(stream)
        with pytest.raises(grpc.RpcError) as caught:
            next(stub.ListAndWatch(api_pb2.Empty(), timeout=30))
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        streams[0].cancel()
        time.sleep(0)  # the slot frees once the server sees the cancel
        deadline = time.monotonic() + 5
        while True:
            try:
                next(stub.ListAndWatch(api_pb2.Empty(), timeout=30))
                break
            except grpc.RpcError:
                assert time.monotonic() < deadline, "a cancelled stream's slot was never freed"
        for stream in streams:
            stream.cancel()


class StuckPlugin(api_pb2_grpc.DevicePluginServicer):
    """A plugin whose GetDevicePluginOptions never returns (until the test ends)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked = 0
        self._lock = threading.Lock()

    def GetDevicePluginOptions(self, request: api_pb2.Empty, context: Any) -> api_pb2.DevicePluginOptions:
        with self._lock:
            self.asked += 1
        self.release.wait(60)
        return api_pb2.DevicePluginOptions()


def test_50_stuck_plugins_do_not_delay_a_good_registration(plugin_dir: Path, tmp_path: Path) -> None:
    manager = DeviceManager(plugin_dir, tmp_path / "state", dial_timeout=2.0)
    manager.start()
    stuck = StuckPlugin()
    server = grpc.server(ThreadPoolExecutor(max_workers=64))
    api_pb2_grpc.add_DevicePluginServicer_to_server(stuck, server)
    for i in range(50):
        server.add_insecure_port(f"unix://{plugin_dir / f'stuck-{i}.sock'}")
    server.start()
    channel = grpc.insecure_channel(f"unix://{plugin_dir / 'kubelet.sock'}")
    good = FakePlugin(plugin_dir, "example.com/good", [FakeDevice("g0")])
    try:
        register = api_pb2_grpc.RegistrationStub(channel).Register
        pending = [
            register.future(
                api_pb2.RegisterRequest(
                    version="v1beta1", endpoint=f"stuck-{i}.sock", resource_name=f"example.com/stuck{i}"
                ),
                timeout=60,
            )
            for i in range(50)
        ]
        deadline = time.monotonic() + 10
        while stuck.asked < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stuck.asked == 50, f"only {stuck.asked} dial-backs in flight: the rest wait for a worker"
        good.serve()
        # The stuck dial-backs end only when released (below) or at their 60 s deadline: a Register queued
        # behind them could not return within 30 s, one served beside them returns at once, whatever the load.
        registering = threading.Thread(target=good.register, daemon=True)
        registering.start()
        registering.join(30)
        assert not registering.is_alive(), "Register waited behind the stuck plugins"
        assert manager.wait_for_resource("example.com/good", 30)
    finally:
        stuck.release.set()
        for future in pending:
            future.exception(timeout=30)
        channel.close()
        good.stop()
        server.stop(0).wait()
        manager.stop()


def test_huge_ids_are_cut_in_error_messages(make_endpoint: Any, plugin_dir: Path, tmp_path: Path) -> None:
    huge = "x" * 65536
    endpoint = make_endpoint()
    with (
        grpc.insecure_channel(f"unix://{endpoint.socket_path}") as channel,
        pytest.raises(grpc.RpcError) as caught,
    ):
        api_pb2_grpc.DevicePluginStub(channel).Allocate(
            api_pb2.AllocateRequest(
                container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=[huge])]
            ),
            timeout=5,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # was RESOURCE_EXHAUSTED
    assert "unknown device" in caught.value.details()
    assert len(caught.value.details()) <= 1100

    manager = DeviceManager(plugin_dir, tmp_path / "state", podresources_socket=plugin_dir / "pr.sock")
    manager.start()
    try:
        with (
            grpc.insecure_channel(f"unix://{plugin_dir / 'pr.sock'}") as channel,
            pytest.raises(grpc.RpcError) as caught,
        ):
            podresources_pb2_grpc.PodResourcesListerStub(channel).Get(
                podresources_pb2.GetPodResourcesRequest(pod_name=huge, pod_namespace=huge), timeout=5
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert len(caught.value.details()) <= 400
        with (
            grpc.insecure_channel(f"unix://{plugin_dir / 'kubelet.sock'}") as channel,
            pytest.raises(grpc.RpcError) as caught,
        ):
            api_pb2_grpc.RegistrationStub(channel).Register(
                api_pb2.RegisterRequest(version="v1beta1", endpoint="x.sock", resource_name=huge),
                timeout=5,
            )
        assert caught.value.code() == grpc.StatusCode.UNKNOWN
        assert "is invalid" in caught.value.details()
        assert len(caught.value.details()) <= 400
    finally:
        manager.stop()
