"""Fixtures: a short kubelet dir, the real DeviceManager on it, and running plugins, all cleaned up."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.cm.devicemanager import DeviceManager
from deviceplugin.config import PluginConfig, load_config, parse_config
from deviceplugin.manager import PluginManager
from tests.deviceplugin.support import CONFIGS, private_cdi


@pytest.fixture
def kubelet_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-dp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Kubelet:
    """The kubelet side: a real DeviceManager that can be restarted like the kubelet (sockets wiped)."""

    def __init__(self, plugin_dir: Path, state_root: Path) -> None:
        self.plugin_dir = plugin_dir
        self.state_root = state_root
        self.generation = 0
        self.manager = self._start()

    def _start(self) -> DeviceManager:
        self.generation += 1
        manager = DeviceManager(
            self.plugin_dir, self.state_root / f"state-{self.generation}", rpc_timeout=5.0
        )
        manager.start()
        return manager

    def restart(self, wipe_dir: bool = False) -> DeviceManager:
        self.manager.stop()
        if wipe_dir:
            # Move away first: a plugin re-serving into the directory must not race the removal.
            doomed = self.plugin_dir.with_name(self.plugin_dir.name + ".old")
            self.plugin_dir.rename(doomed)
            shutil.rmtree(doomed)
        self.manager = self._start()
        return self.manager

    def stop(self) -> None:
        self.manager.stop()


@pytest.fixture
def kubelet(kubelet_dir: Path, tmp_path: Path) -> Iterator[Kubelet]:
    kubelet = Kubelet(kubelet_dir, tmp_path)
    yield kubelet
    kubelet.stop()


def static_config() -> PluginConfig:
    return load_config(CONFIGS / "static.yaml")


@pytest.fixture
def run_plugin(kubelet_dir: Path) -> Iterator[Callable[..., PluginManager]]:
    running: list[tuple[PluginManager, threading.Thread]] = []

    def start(config: PluginConfig | dict[str, object] | None = None) -> PluginManager:
        if config is None:
            config = static_config()
        elif isinstance(config, dict):
            config = parse_config(private_cdi(config, kubelet_dir))
        manager = PluginManager(config, str(kubelet_dir))
        thread = threading.Thread(target=manager.run, name="plugin-manager", daemon=True)
        thread.start()
        running.append((manager, thread))
        return manager

    yield start
    for manager, thread in running:
        manager.stop()
        thread.join(timeout=10)
        assert not thread.is_alive(), "plugin manager did not stop"
