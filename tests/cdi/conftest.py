"""Fixtures: podman in a private mount namespace (one per session), and our cpu plugin with CDI on, served
as a real process to our real device manager (the kubelet side, with its PodResources socket)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cm.devicemanager import DeviceManager, PodRef
from agent.container.resources import ContainerResources
from tests.cdi.podman import Podman, PodmanMissing
from tests.deviceplugin.support import wait_until

RESOURCE = "kubenode.io/cpu"
PLUGIN = (sys.executable, "-m", "cli.main", "deviceplugin")


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    try:
        runner = Podman()
    except PodmanMissing as exc:
        pytest.fail(f"podman CDI tests cannot run: {exc}", pytrace=False)
    try:
        yield runner
    finally:
        runner.close()


@pytest.fixture
def cdi_dir(podman: Podman) -> Iterator[Path]:
    """The CDI dir podman sees as /var/run/cdi, emptied after each test."""
    yield podman.cdi_dir
    for entry in podman.cdi_dir.iterdir():
        entry.unlink()


class Node:
    """The kubelet side (DeviceManager + PodResources) and `kubenode deviceplugin` with CDI on."""

    def __init__(self, base: Path, cdi_dir: Path) -> None:
        self.plugin_dir = base / "plugins"
        self.plugin_dir.mkdir()
        self.podresources = self.plugin_dir / "pod-resources.sock"
        self.manager = DeviceManager(
            self.plugin_dir, base / "state", podresources_socket=self.podresources, rpc_timeout=10.0
        )
        self.manager.start()
        self.config = base / "cpu-cdi.yaml"
        self.config.write_text(
            "version: v1\n"
            "resources:\n"
            f"  - name: {RESOURCE}\n"
            "    backend: cpu\n"
            "    cpu:\n"
            "      cdi: true\n"
            f"      cdiSpecDir: {cdi_dir}\n"
            f"      podResourcesSocket: {self.podresources}\n"
            "      cdiPruneSeconds: 0.2\n"
        )
        self._stderr: str | None = None
        self.plugin = subprocess.Popen(
            [*PLUGIN, "--config", str(self.config), "--kubelet-dir", str(self.plugin_dir)],
            stderr=subprocess.PIPE,
            text=True,
        )
        if not self.manager.wait_for_resource(RESOURCE, 20):
            stderr = self.close()
            raise AssertionError(f"the cpu plugin did not register with the device manager: {stderr}")

    def allocate(self, cpus: int = 1) -> tuple[str, ContainerResources]:
        uid = uuid.uuid4().hex
        options = self.manager.allocate(PodRef(uid, "default", f"pod-{uid[:6]}"), "main", {RESOURCE: cpus})
        return uid, options

    def close(self) -> str:
        """Stop both (again: nothing more); returns the plugin's stderr."""
        if self._stderr is None:
            self.plugin.terminate()
            _, self._stderr = self.plugin.communicate(timeout=15)
            self.manager.stop()
        return self._stderr


@contextlib.contextmanager
def started_node(cdi_dir: Path) -> Iterator[Node]:
    """A Node on `cdi_dir` as it is now (a test may put a spec there first); closed and removed after."""
    base = Path(tempfile.mkdtemp(prefix="kn-cdin-", dir="/tmp"))  # short: unix socket paths
    try:
        node = Node(base, cdi_dir)
        yield node
        node.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def node(cdi_dir: Path) -> Iterator[Node]:
    with started_node(cdi_dir) as node:
        yield node


__all__ = ["Node", "started_node", "wait_until"]
