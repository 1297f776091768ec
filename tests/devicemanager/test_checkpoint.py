"""The manager's own checkpoint: restart keeps live pods' devices, frees dead pods', survives bad files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from agent.cm.devicemanager import DeviceManager, PodRef
from tests.conformance.fake_device_plugin import FakePlugin
from tests.devicemanager.conftest import FakeClock

RES = "example.com/fake"


def test_restart_restores_allocations_and_never_gives_a_held_device_again(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin], plugin_dir: Path
) -> None:
    first = make_manager()
    plugin = make_plugin()
    plugin.register()
    assert first.wait_for_resource(RES, 5)
    live, dead = PodRef("live", "default", "a"), PodRef("dead", "default", "b")
    options = first.allocate(live, "main", {RES: 2})
    first.allocate(dead, "main", {RES: 1})
    first.stop()
    assert first.checkpoint_path.name == "kubenode_device_checkpoint.json"
    assert not (plugin_dir / "kubelet_internal_checkpoint").exists()

    second = make_manager()
    assert second.capacity() == {RES: 0}  # registered before, no devices until the plugin comes back
    assert second.run_options("live", "main") == options
    second.retain_pods(["live"])
    plugin.serve()  # the restart removed its socket
    plugin.register()
    assert second.wait_for_resource(RES, 5)
    assert second.available() == {RES: 2}
    got = second.allocate(PodRef("new", "default", "c"), "main", {RES: 2})
    assert set(got.envs["FAKE_DEVICES"].split(",")).isdisjoint(options.envs["FAKE_DEVICES"].split(","))


def test_a_resource_from_the_checkpoint_expires_if_its_plugin_never_returns(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin], clock: FakeClock
) -> None:
    first = make_manager()
    plugin = make_plugin()
    plugin.register()
    assert first.wait_for_resource(RES, 5)
    first.stop()
    second = make_manager(stop_grace_period=10)
    assert RES in second.capacity()
    clock.advance(10)
    assert second.capacity() == {}


def test_a_corrupt_checkpoint_is_reported_and_ignored(
    make_manager: Callable[..., DeviceManager], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    path = state / "kubenode_device_checkpoint.json"
    path.write_text(
        json.dumps({"version": 1, "data": {"entries": [], "registeredDevices": {}}, "checksum": "0"})
    )
    manager = make_manager()
    assert manager.capacity() == {} and manager.allocations() == []
