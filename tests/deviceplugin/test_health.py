"""ListAndWatch sends the full list again on every health change (health file and in-process switch)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.cm.devicemanager import DeviceManager
from deviceplugin.backends.static import StaticBackend
from deviceplugin.config import StaticDevice, StaticOptions
from deviceplugin.manager import PluginManager
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from tests.deviceplugin.conftest import Kubelet
from tests.deviceplugin.support import plugin_client, wait_until


def health_of(manager: DeviceManager, resource: str) -> dict[str, bool]:
    status = next(r for r in manager.resources() if r.name == resource)
    return {d.id: d.healthy for d in status.devices}


def test_health_file_flips_devices_and_replicas(
    kubelet_dir: Path, kubelet: Kubelet, run_plugin: Callable[..., PluginManager]
) -> None:
    run_plugin()
    assert kubelet.manager.wait_for_resource("example.com/accel", 5)
    health_file = kubelet_dir / "static-health"
    # The plugin learns of the file by inotify (no polling, so nothing else could flip a device): a generous
    # wait, as a loaded machine needs, still proves it.
    health_file.write_text("# faulty\ndongle-1\naccel-0\n")
    assert wait_until(lambda: not health_of(kubelet.manager, "example.com/dongle")["dongle-1"], 30)
    assert health_of(kubelet.manager, "example.com/dongle") == {"dongle-0": True, "dongle-1": False}
    assert wait_until(lambda: kubelet.manager.allocatable().get("example.com/accel") == 2, 30)
    assert kubelet.manager.capacity()["example.com/accel"] == 4
    health_file.unlink()
    assert wait_until(lambda: all(health_of(kubelet.manager, "example.com/dongle").values()), 30)
    assert wait_until(lambda: kubelet.manager.allocatable().get("example.com/accel") == 4, 30)


def test_listandwatch_sends_full_list_on_each_change(
    kubelet: Kubelet, run_plugin: Callable[..., PluginManager]
) -> None:
    plugin = run_plugin()
    assert plugin.all_registered.wait(5)
    resource = plugin.resource("example.com/dongle")
    backend = resource.backend
    assert isinstance(backend, StaticBackend)
    with plugin_client(resource.endpoint.socket_path) as stub:
        stream = stub.ListAndWatch(api_pb2.Empty(), timeout=10)
        first = next(stream)
        assert [(d.ID, d.health) for d in first.devices] == [("dongle-0", "Healthy"), ("dongle-1", "Healthy")]
        assert [list(n.ID for n in d.topology.nodes) for d in first.devices] == [[0], [1]]
        backend.set_health("dongle-0", False)
        second = next(stream)
        assert [(d.ID, d.health) for d in second.devices] == [
            ("dongle-0", "Unhealthy"),
            ("dongle-1", "Healthy"),
        ]
        backend.set_health("dongle-0", True)
        third = next(stream)
        assert all(d.health == "Healthy" for d in third.devices) and len(third.devices) == 2
        stream.cancel()


def test_health_watcher_survives_an_exception_and_keeps_watching(
    kubelet_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    health_file = kubelet_dir / "static-health"
    options = StaticOptions(
        devices=(StaticDevice(id="dongle-0"), StaticDevice(id="dongle-1")), health_file=health_file.name
    )
    backend = StaticBackend(options, str(kubelet_dir))
    changes: list[bool] = []
    changed = threading.Event()

    def on_change() -> None:
        changes.append(True)
        if len(changes) == 1:
            raise RuntimeError("first notification fails")
        changed.set()

    backend.start(on_change)
    try:
        health_file.write_text("dongle-1\n")
        assert wait_until(lambda: len(changes) == 1, 30)
        health_file.write_text("dongle-0\n")
        assert changed.wait(30), "the watcher stopped after the exception"
        assert {d.id: d.healthy for d in backend.devices()} == {"dongle-0": False, "dongle-1": True}
        assert "static health watcher" in caplog.text and "first notification fails" in caplog.text
    finally:
        backend.stop()
