"""The agent's plugin watcher against kubenode's DRA driver and deliberately wrong registration servers."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.cm.dra.plugins import DriverRegistry
from agent.cm.dra.watcher import PluginWatcher
from deviceplugin.dra.driver import Driver
from deviceplugin.dra.inventory import CPU_DRIVER
from kubenode.api.pluginregistration.v1 import api_pb2 as reg
from kubenode.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from tests.deviceplugin.support import wait_until


@pytest.fixture
def watched(driver: Driver) -> Iterator[tuple[PluginWatcher, DriverRegistry, list[str]]]:
    registry = DriverRegistry()
    seen: list[str] = []
    watcher = PluginWatcher(driver.reg_socket.parent, registry, seen.append)
    watcher.start()
    yield watcher, registry, seen
    watcher.stop()


def test_a_driver_already_there_registers_and_is_told(
    driver: Driver, watched: tuple[PluginWatcher, DriverRegistry, list[str]]
) -> None:
    _, registry, seen = watched
    assert registry.names() == [CPU_DRIVER]
    client = registry.get(CPU_DRIVER)
    assert (
        client is not None and client.version == "v1.DRAPlugin" and client.endpoint == str(driver.dra_socket)
    )
    assert seen == [CPU_DRIVER]
    assert driver.registration.registered.wait(5)


def test_gone_and_back(driver: Driver, watched: tuple[PluginWatcher, DriverRegistry, list[str]]) -> None:
    _, registry, seen = watched
    driver.reg_socket.unlink()
    assert wait_until(lambda: registry.names() == [], timeout=10)
    driver.serve_registration()
    assert wait_until(lambda: registry.names() == [CPU_DRIVER], timeout=10)
    # Told after NotifyRegistrationStatus, a moment after the registry has the client.
    assert wait_until(lambda: seen == [CPU_DRIVER, CPU_DRIVER], timeout=10), seen


class Liar(reg_grpc.RegistrationServicer):
    def __init__(self, info: Any) -> None:
        self.info = info
        self.status: list[Any] = []

    def GetInfo(self, request: Any, context: Any) -> Any:
        return self.info

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        self.status.append(request)
        return reg.RegistrationStatusResponse()


@pytest.mark.parametrize(
    ("info", "error"),
    [
        (
            dict(type="DRAPlugin", name="x.example.com", supported_versions=["v0.DRAPlugin"]),
            "none of the versions",
        ),
        (
            dict(type="DRAPlugin", name="x.example.com", supported_versions=["v1.DRAPlugin"]),
            "is not a socket",
        ),
        (dict(type="CSIPlugin", name="csi.example.com", supported_versions=["1.0.0"]), "not handled"),
    ],
)
def test_a_wrong_plugin_is_refused_with_the_reason(
    driver: Driver, watched: tuple[PluginWatcher, DriverRegistry, list[str]], info: dict[str, Any], error: str
) -> None:
    _, registry, _ = watched
    liar = Liar(reg.PluginInfo(endpoint=str(driver.dir / "nothing.sock"), **info))
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    reg_grpc.add_RegistrationServicer_to_server(liar, server)
    socket = Path(driver.reg_socket.parent, "liar-reg.sock")
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        assert wait_until(lambda: bool(liar.status), timeout=10)
        assert not liar.status[0].plugin_registered
        assert error in liar.status[0].error
        assert registry.names() == [CPU_DRIVER]
    finally:
        server.stop(None)
