"""Allocation: NUMA alignment, GetPreferredAllocation (short/invalid answers), merging, rollback, PreStart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent.cm.devicemanager import AllocationError, DeviceManager, PodRef, PreStartError, checkpoint
from agent.container.resources import DeviceSpec, Mount
from tests.conformance.fake_device_plugin import FakeDevice, FakePlugin

RES = "example.com/fake"
POD = PodRef("uid-1", "default", "pod-1")
NUMA_DEVICES = [FakeDevice(f"d{i}", numa=(i % 2,)) for i in range(6)]  # d0,d2,d4 on node 0; d1,d3,d5 on 1


def ready(manager: DeviceManager, plugin: FakePlugin) -> None:
    plugin.register()
    assert manager.wait_for_resource(plugin.resource, 5)


def test_numa_hint_picks_aligned_devices_and_returns_the_plugins_options(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    plugin = make_plugin(devices=NUMA_DEVICES)
    ready(manager, plugin)
    options = manager.allocate(POD, "main", {RES: 2, "cpu": 1000}, numa_hint=frozenset({1}))
    assert plugin.calls.allocate == [[["d1", "d3"]]]  # exactly one container request
    assert options.envs == {"FAKE_DEVICES": "d1,d3"}
    assert options.devices == [
        DeviceSpec("/dev/fake-0", "/dev/null", "rw"),
        DeviceSpec("/dev/fake-1", "/dev/null", "rw"),
    ]
    assert options.mounts == [Mount("/run/fake", "/etc/hostname", True)]
    assert options.cdi_devices == ["example.com/fake=d1", "example.com/fake=d3"]
    assert manager.available() == {RES: 4}
    assert manager.run_options(POD.uid, "main") == options
    (alloc,) = manager.allocations()
    assert alloc.devices == {RES: ("d1", "d3")} and alloc.numa[RES] == {"d1": (1,), "d3": (1,)}


def test_more_than_the_aligned_devices_takes_all_aligned_then_asks_for_the_rest(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    plugin = make_plugin(devices=NUMA_DEVICES, preferred_available=True, preferred=lambda a, m, s: ["d4"])
    ready(manager, plugin)
    manager.allocate(POD, "main", {RES: 4}, numa_hint=frozenset({1}))
    (available, must_include, size) = plugin.calls.preferred[0]
    assert must_include == ["d1", "d3", "d5"] and size == 4 and set(available) == {f"d{i}" for i in range(6)}
    assert plugin.calls.allocate == [[["d1", "d3", "d5", "d4"]]]


def test_preferred_allocation_is_used_and_a_short_answer_is_filled(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    plugin = make_plugin(devices=NUMA_DEVICES, preferred_available=True, preferred=lambda a, m, s: ["d5"])
    ready(manager, plugin)
    manager.allocate(POD, "main", {RES: 3})
    assert plugin.calls.preferred == [([f"d{i}" for i in range(6)], [], 3)]
    assert plugin.calls.allocate == [[["d5", "d0", "d1"]]]


def test_an_invalid_preferred_answer_is_ignored(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    plugin = make_plugin(
        devices=NUMA_DEVICES,
        preferred_available=True,
        preferred=lambda a, m, s: ["nope", "d2", "d2", "x", "y"],
    )
    ready(manager, plugin)
    manager.allocate(POD, "main", {RES: 2}, numa_hint=frozenset({1}))
    assert plugin.calls.allocate == [[["d1", "d3"]]]  # d2 is not aligned; unknown IDs and repeats dropped


def test_preferred_allocation_is_not_called_unless_advertised(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    plugin = make_plugin(devices=NUMA_DEVICES, preferred_available=False)
    ready(manager, plugin)
    manager.allocate(POD, "main", {RES: 2})
    assert plugin.calls.preferred == []


def test_allocation_is_idempotent_per_container(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    plugin = make_plugin()
    ready(manager, plugin)
    first = manager.allocate(POD, "main", {RES: 2})
    assert manager.allocate(POD, "main", {RES: 2}) == first
    assert len(plugin.calls.allocate) == 1
    with pytest.raises(AllocationError, match="already holds"):
        manager.allocate(POD, "main", {RES: 3})


def test_too_many_requested_names_the_resource_and_the_counts(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    ready(manager, make_plugin())
    with pytest.raises(AllocationError) as caught:
        manager.allocate(POD, "main", {RES: 5})
    assert (
        str(caught.value) == f"requested number of devices unavailable for {RES}. Requested: 5, Available: 4"
    )
    with pytest.raises(AllocationError, match=r"cannot allocate unregistered device example\.com/other"):
        manager.allocate(POD, "main", {"example.com/other": 1})


def test_a_failed_allocate_rolls_back_every_resource(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    good = make_plugin(resource="example.com/a")
    bad = make_plugin(resource="example.com/b", allocate_error="device on fire")
    ready(manager, good)
    ready(manager, bad)
    with pytest.raises(AllocationError, match=r"Allocate failed for example.com/b .*device on fire"):
        manager.allocate(POD, "main", {"example.com/a": 1, "example.com/b": 1})
    assert manager.available() == {"example.com/a": 4, "example.com/b": 4}
    assert manager.allocations() == [] and manager.run_options(POD.uid, "main") is None
    assert len(good.calls.allocate) == 1  # the plugin was asked; the kubelet does not tell it about rollback


def test_merged_options_keep_the_first_value_and_deduplicate_cdi(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    a = make_plugin(resource="example.com/a", extra_envs=lambda ids: {"SHARED": "from-a"})
    b = make_plugin(resource="example.com/b", extra_envs=lambda ids: {"SHARED": "from-b", "ONLY_B": "1"})
    ready(manager, a)
    ready(manager, b)
    options = manager.allocate(POD, "main", {"example.com/a": 1, "example.com/b": 1})
    assert options.envs["SHARED"] == "from-a" and options.envs["ONLY_B"] == "1"
    assert options.mounts == [Mount("/run/fake", "/etc/hostname", True)]  # same container path: first kept
    assert options.cdi_devices == ["example.com/fake=dev-0"]


def test_pre_start_is_called_only_when_required(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    needs = make_plugin(resource="example.com/a", pre_start_required=True)
    skips = make_plugin(resource="example.com/b")
    ready(manager, needs)
    ready(manager, skips)
    manager.allocate(POD, "main", {"example.com/a": 2, "example.com/b": 1})
    manager.pre_start(POD.uid, "main")
    manager.pre_start(POD.uid, "no-devices")  # nothing held: nothing to do
    assert needs.calls.pre_start == [["dev-0", "dev-1"]]
    assert skips.calls.pre_start == []
    needs.stop()
    assert manager.wait_for(lambda: not manager.resources()[0].connected, 5)
    with pytest.raises(PreStartError, match=r"example\.com/a"):
        manager.pre_start(POD.uid, "main")


def test_free_and_retain_release_devices(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    ready(manager, make_plugin())
    manager.allocate(POD, "main", {RES: 1})
    manager.allocate(PodRef("uid-2", "default", "pod-2"), "main", {RES: 2})
    manager.allocate(PodRef("uid-3", "default", "pod-3"), "main", {RES: 1})
    manager.free_pod("uid-1")
    assert manager.available() == {RES: 1}
    manager.retain_pods(["uid-3"])
    assert manager.available() == {RES: 3}
    assert [a.pod.uid for a in manager.allocations()] == ["uid-3"]


def test_retain_pods_writes_the_checkpoint_once_for_all_dead_pods(
    make_manager: Callable[..., DeviceManager],
    make_plugin: Callable[..., FakePlugin],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manager = make_manager()
    ready(manager, make_plugin())
    for n in range(3):
        manager.allocate(PodRef(f"uid-{n}", "default", f"pod-{n}"), "main", {RES: 1})
    saves: list[int] = []
    real_save = checkpoint.save

    def counting_save(path: Any, data: Any) -> None:
        saves.append(len(data.entries))
        real_save(path, data)

    monkeypatch.setattr(checkpoint, "save", counting_save)
    manager.retain_pods([])
    assert saves == [0]
    assert checkpoint.load(manager.checkpoint_path).entries == []
