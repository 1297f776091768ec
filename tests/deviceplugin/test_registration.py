"""Registration with the kubelet and staying registered across kubelet restarts."""

from __future__ import annotations

import functools
import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from deviceplugin.config import default_socket_name, load_config
from deviceplugin.endpoint import EndpointError
from deviceplugin.manager import PluginManager
from tests.deviceplugin.conftest import Kubelet
from tests.deviceplugin.support import CONFIGS

RESOURCES = ("example.com/dongle", "example.com/accel")


def wait_registered(kubelet: Kubelet, timeout: float = 30.0) -> None:
    for name in RESOURCES:
        assert kubelet.manager.wait_for_resource(name, timeout), f"{name} did not register"


def test_registers_every_resource_with_devices_topology_and_options(
    kubelet: Kubelet, run_plugin: Callable[..., PluginManager]
) -> None:
    plugin = run_plugin()
    wait_registered(kubelet)
    assert plugin.all_registered.wait(5)
    statuses = {r.name: r for r in kubelet.manager.resources()}
    dongle = {d.id: d for d in statuses["example.com/dongle"].devices}
    assert set(dongle) == {"dongle-0", "dongle-1"}
    assert dongle["dongle-0"].numa_nodes == frozenset({0}) and dongle["dongle-1"].numa_nodes == frozenset({1})
    assert all(d.healthy for d in dongle.values())
    accel = {d.id for d in statuses["example.com/accel"].devices}
    assert accel == {"accel-0::0", "accel-0::1", "accel-1::0", "accel-1::1"}
    assert statuses["example.com/dongle"].get_preferred_allocation_available
    assert not statuses["example.com/dongle"].pre_start_required


def test_waits_for_kubelet_then_registers(
    kubelet_dir: Path, tmp_path: Path, run_plugin: Callable[..., PluginManager]
) -> None:
    plugin = run_plugin()
    sockets = [kubelet_dir / default_socket_name(name) for name in RESOURCES]
    assert _wait(lambda: all(s.exists() for s in sockets)), "plugin did not serve before the kubelet came"
    assert not plugin.all_registered.is_set()
    kubelet = Kubelet(kubelet_dir, tmp_path)  # kubelet.sock appears: the plugin must notice and register
    try:
        wait_registered(kubelet)
    finally:
        kubelet.stop()


@pytest.mark.parametrize("wipe_dir", [False, True], ids=["sockets-removed", "dir-recreated"])
def test_reregisters_after_kubelet_restart(
    kubelet: Kubelet, run_plugin: Callable[..., PluginManager], wipe_dir: bool
) -> None:
    plugin = run_plugin()
    wait_registered(kubelet)
    before = plugin.registrations
    kubelet.restart(wipe_dir=wipe_dir)
    wait_registered(kubelet, timeout=30)  # on the inotify event of the new kubelet.sock; no clock asserted
    assert plugin.registrations == before + len(RESOURCES)
    # Same process, re-served on fresh sockets. With the directory recreated a plugin may serve a third time:
    # one that re-served between the kubelet's stop and the directory's removal saw that socket go too (seen
    # once under a loaded fresh-clone run, with each resource registered exactly once more as asserted above).
    assert all(r.endpoint.serve_count >= 2 for r in plugin.resources)
    assert all(r.endpoint.serve_count == 2 for r in plugin.resources) or wipe_dir
    assert all(r.connected for r in kubelet.manager.resources())


def test_serves_again_when_its_own_socket_disappears(
    kubelet: Kubelet, run_plugin: Callable[..., PluginManager]
) -> None:
    plugin = run_plugin()
    wait_registered(kubelet)
    dongle = plugin.resource("example.com/dongle")
    dongle.endpoint.socket_path.unlink()
    assert _wait(lambda: dongle.endpoint.serve_count == 2 and dongle.endpoint.socket_intact())
    assert _wait(lambda: plugin.all_registered.is_set() and _connected(kubelet, "example.com/dongle"))


def test_stale_socket_of_ours_is_replaced(
    kubelet_dir: Path, kubelet: Kubelet, run_plugin: Callable[..., PluginManager]
) -> None:
    stale = kubelet_dir / default_socket_name("example.com/dongle")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(stale))  # left behind as if by a crashed earlier run
    with socket.socket(socket.AF_UNIX) as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(str(stale))
    run_plugin()
    wait_registered(kubelet)  # the kubelet dialled the socket path back, so it is live now


def test_refuses_a_regular_file_in_place_of_its_socket(kubelet_dir: Path) -> None:
    blocker = kubelet_dir / default_socket_name("example.com/dongle")
    blocker.write_text("not a socket")
    manager = PluginManager(load_config(CONFIGS / "static.yaml"), str(kubelet_dir))
    with pytest.raises(EndpointError, match=re.escape(str(blocker))):
        manager.run()
    assert blocker.read_text() == "not a socket"
    assert not (kubelet_dir / default_socket_name("example.com/accel")).exists()


def test_backends_stop_when_the_kubelet_dir_cannot_be_made(
    kubelet_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (kubelet_dir / "file").write_text("in the way")
    manager = PluginManager(load_config(CONFIGS / "static.yaml"), str(kubelet_dir / "file" / "dir"))
    stopped: list[str] = []
    for resource in manager.resources:
        monkeypatch.setattr(resource.backend, "stop", functools.partial(stopped.append, resource.config.name))
    with pytest.raises(NotADirectoryError):
        manager.run()
    assert sorted(stopped) == sorted(RESOURCES)


def test_stop_removes_sockets_and_threads(
    kubelet_dir: Path, kubelet: Kubelet, run_plugin: Callable[..., PluginManager]
) -> None:
    plugin = run_plugin()
    wait_registered(kubelet)
    plugin.stop()
    assert _wait(lambda: not any(r.endpoint.socket_path.exists() for r in plugin.resources))
    assert _wait(lambda: not any(r.connected for r in kubelet.manager.resources()))


def _connected(kubelet: Kubelet, name: str) -> bool:
    return any(r.name == name and r.connected for r in kubelet.manager.resources())


def _wait(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    from tests.deviceplugin.support import wait_until

    return wait_until(predicate, timeout)


def test_registration_made_while_the_kubelet_restarts_is_kept(kubelet: Kubelet, kubelet_dir: Path) -> None:
    """The kubelet restarts between the plugin's stat of kubelet.sock and its Register call, so Register
    reaches the new kubelet: the registration is the new kubelet.sock's, and no second Register follows
    (kubelet 1.37 refuses one while the first is connected: 'device plugin already connected', found under
    the real kubelet, interop/tests/test_deviceplugin_under_kubelet.py)."""
    plugin = PluginManager(load_config(CONFIGS / "static.yaml"), str(kubelet_dir))
    try:
        dongle = plugin.resource("example.com/dongle")
        real_register = dongle.endpoint.register
        restarted: list[bool] = []

        def register_across_a_restart(kubelet_socket: Path) -> None:
            if not restarted:
                # As the real kubelet restarts: it removes every socket (ours too) and listens on a new
                # kubelet.sock; the plugin, woken by the removal, serves again and registers, having read
                # kubelet.sock's identity before the new one was there.
                restarted.append(True)
                kubelet.restart()
                dongle.endpoint.serve()
            real_register(kubelet_socket)

        dongle.endpoint.register = register_across_a_restart  # type: ignore[method-assign]
        plugin._reconcile()
        assert restarted and kubelet.manager.wait_for_resource("example.com/dongle", 10)
        assert plugin.unregistered() == [], "the registration was recorded against the old kubelet.sock"
        before = plugin.registrations
        plugin._reconcile()
        assert plugin.registrations == before, "registered again with a kubelet that already had it"
    finally:
        for resource in plugin.resources:
            resource.endpoint.finish_stop(resource.endpoint.begin_stop())
        plugin.close()
