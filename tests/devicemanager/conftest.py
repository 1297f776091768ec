"""Fixtures: a short socket dir, a started DeviceManager and in-process fake plugins, all cleaned up."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cm.devicemanager import DeviceManager
from tests.conformance.fake_device_plugin import FakeDevice, FakePlugin


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-dm-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_manager(
    plugin_dir: Path, tmp_path: Path, clock: FakeClock
) -> Iterator[Callable[..., DeviceManager]]:
    started: list[DeviceManager] = []

    def make(**kwargs: Any) -> DeviceManager:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("dial_timeout", 2.0)
        manager = DeviceManager(plugin_dir, tmp_path / "state", **kwargs)
        manager.start()
        started.append(manager)
        return manager

    yield make
    for manager in started:
        manager.stop()


@pytest.fixture
def make_plugin(plugin_dir: Path) -> Iterator[Callable[..., FakePlugin]]:
    plugins: list[FakePlugin] = []

    def make(
        resource: str = "example.com/fake", devices: list[FakeDevice] | None = None, **kwargs: Any
    ) -> FakePlugin:
        if devices is None:
            devices = [FakeDevice(f"dev-{i}") for i in range(4)]
        plugin = FakePlugin(plugin_dir, resource, devices, **kwargs)
        plugin.serve()
        plugins.append(plugin)
        return plugin

    yield make
    for plugin in plugins:
        plugin.stop()
