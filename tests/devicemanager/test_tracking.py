"""Capacity and health tracking: list replacement, stream end, grace period, re-registration (k8s #121994)."""

from __future__ import annotations

from collections.abc import Callable

from agent.cm.devicemanager import DeviceManager, PodRef, describe_resources
from tests.conformance.fake_device_plugin import FakeDevice, FakePlugin
from tests.devicemanager.conftest import FakeClock

RES = "example.com/fake"


def test_each_message_replaces_the_device_list(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    plugin = make_plugin(
        devices=[FakeDevice("a"), FakeDevice("b", healthy=False), FakeDevice("c", numa=(1,))]
    )
    plugin.register()
    assert manager.wait_for_resource(RES, 5)
    assert (manager.capacity(), manager.allocatable(), manager.available()) == ({RES: 3}, {RES: 2}, {RES: 2})
    (status,) = manager.resources()
    assert [(d.id, d.health, sorted(d.numa_nodes)) for d in status.devices] == [
        ("a", "Healthy", []),
        ("b", "Unhealthy", []),
        ("c", "Healthy", [1]),
    ]
    assert describe_resources(manager.resources()).splitlines() == [
        f"{RES}: capacity 3, allocatable 2, allocated 0 (connected)",
        "  a  Healthy    numa -",
        "  b  Unhealthy  numa -",
        "  c  Healthy    numa 1",
    ]
    plugin.set_devices([FakeDevice("b"), FakeDevice("d")])
    assert manager.wait_for(lambda: manager.capacity() == {RES: 2} and manager.allocatable() == {RES: 2}, 5)
    assert [d.id for d in manager.resources()[0].devices] == ["b", "d"]


def test_stream_end_makes_devices_unhealthy_then_the_resource_expires(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin], clock: FakeClock
) -> None:
    manager = make_manager(stop_grace_period=300.0)
    plugin = make_plugin()
    plugin.register()
    assert manager.wait_for_resource(RES, 5)
    plugin.stop()
    assert manager.wait_for(lambda: manager.allocatable() == {RES: 0}, 5)
    assert manager.capacity() == {RES: 4}
    assert not manager.resources()[0].connected
    clock.advance(299.0)
    assert manager.capacity() == {RES: 4}
    clock.advance(1.0)
    assert manager.capacity() == {}


def test_reregistration_replaces_and_the_old_stream_end_does_not_knock_out_the_new(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    old = make_plugin(devices=[FakeDevice("x")])
    old.register()
    assert manager.wait_for_resource(RES, 5)
    new = make_plugin(devices=[FakeDevice("y"), FakeDevice("z")])
    new.register()
    assert manager.wait_for(lambda: manager.capacity() == {RES: 2}, 5)
    old.stop()  # kubernetes #121994: this stream's end used to disconnect the new plugin
    status = manager.resources()[0]
    assert status.connected and status.endpoint == str(new.socket_path)
    assert manager.allocatable() == {RES: 2}
    manager.allocate(PodRef("uid-1", "default", "p"), "c", {RES: 1})
    assert new.calls.allocate and not old.calls.allocate


def test_a_plugin_that_registers_again_after_its_stream_ended_is_healthy_again(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    plugin = make_plugin()
    plugin.register()
    assert manager.wait_for_resource(RES, 5)
    plugin.stop()
    assert manager.wait_for(lambda: manager.allocatable() == {RES: 0}, 5)
    plugin.serve()
    plugin.register()
    assert manager.wait_for(lambda: manager.allocatable() == {RES: 4}, 5)
