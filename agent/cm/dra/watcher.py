"""The plugin watcher (the kubelet's pluginmanager) for DRA drivers on `--plugins-registry-dir`.

Flow: a socket appears in the registry directory (inotify, kubenode/dirwatch.py; at start every socket
already there) -> `GetInfo` on it -> a type other than DRAPlugin is logged and left alone (the kubelet
has handlers for CSI too; the agent only for DRA) -> no supported version among the advertised ones,
or an endpoint that does not answer, is refused with `NotifyRegistrationStatus(false, error)` -> else the
driver's client is added to the registry (plugins.py) and `NotifyRegistrationStatus(true)` sent. A socket
that disappears unregisters the driver registered through it; a driver that comes back re-registers.
When the directory itself is removed and recreated, every socket found is registered again. A
registration that fails (a driver not serving yet) is retried every second while its socket is there.
"""

from __future__ import annotations

import logging
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import grpc

from agent.cm.dra.plugins import DriverClient, DriverRegistry, pick_version
from kubenode.api.pluginregistration.v1 import api_pb2 as reg
from kubenode.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubenode.dirwatch import DirWatcher, EventKind

log = logging.getLogger("agent.dra")

DRA_PLUGIN_TYPE = "DRAPlugin"
INFO_TIMEOUT_S = 10.0
RETRY_S = 1.0  # a failed registration is tried again this often while its socket is there


class PluginWatcher:
    def __init__(
        self,
        directory: Path,
        registry: DriverRegistry,
        on_registered: Callable[[str], None] = lambda name: None,
    ) -> None:
        self.directory = directory
        self.registry = registry
        self._on_registered = on_registered
        self._by_socket: dict[str, str] = {}  # socket name -> driver registered through it
        self._pending: set[str] = (
            set()
        )  # sockets whose registration failed: retried (the kubelet's reconciler)
        self._watcher: DirWatcher | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._watcher = DirWatcher(self.directory)
        self.rescan()
        self._thread = threading.Thread(target=self._run, name="dra-plugin-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.wake()
        if self._thread is not None:
            self._thread.join()
        if self._watcher is not None:
            self._watcher.close()
        self.registry.close()

    def _run(self) -> None:
        assert self._watcher is not None
        while not self._stopping.is_set():
            events = self._watcher.read(RETRY_S if self._pending else None)
            if not events:
                for name in sorted(self._pending):
                    self.register(name)
            for event in events:
                if self._stopping.is_set():
                    return
                try:
                    if event.kind is EventKind.RESET:
                        self.rescan()
                    elif event.kind is EventKind.CREATED:
                        self.register(event.name)
                    elif event.kind is EventKind.DELETED:
                        self.unregister(event.name)
                except Exception:  # one bad socket must not end watching
                    log.exception("plugin watcher: %s %s", event.kind.value, event.name)

    def rescan(self) -> None:
        present = (
            {p.name for p in self.directory.glob("*") if _is_socket(p)} if self.directory.is_dir() else set()
        )
        for name in list(self._by_socket):
            if name not in present:
                self.unregister(name)
        for name in sorted(present):
            self.register(name)

    def register(self, socket_name: str) -> None:
        path = self.directory / socket_name
        self._pending.discard(socket_name)
        if not _is_socket(path):
            return
        try:
            with grpc.insecure_channel(f"unix://{path}") as channel:
                stub = reg_grpc.RegistrationStub(channel)
                # The socket exists from bind() on, a moment before the driver serves: wait for it to.
                info = stub.GetInfo(reg.InfoRequest(), timeout=INFO_TIMEOUT_S, wait_for_ready=True)
                error = self._validate(info)
                if error is None:
                    client = DriverClient(
                        info.name, info.endpoint, pick_version(list(info.supported_versions)) or ""
                    )
                    self.registry.add(client)
                    self._by_socket[socket_name] = info.name
                stub.NotifyRegistrationStatus(
                    reg.RegistrationStatus(plugin_registered=error is None, error=error or ""),
                    timeout=INFO_TIMEOUT_S,
                )
        except grpc.RpcError as exc:
            log.warning(
                "plugin %s: registration failed (retried): %s: %s", path, exc.code().name, exc.details()
            )
            self._pending.add(socket_name)
            return
        if error is None:
            log.info("DRA driver %s registered (%s, %s)", info.name, info.endpoint, client.version)
            self._on_registered(info.name)
        elif info.type == DRA_PLUGIN_TYPE:
            log.warning("plugin %s: %s", path, error)

    def _validate(self, info: reg.PluginInfo) -> str | None:
        if info.type != DRA_PLUGIN_TYPE:
            return f"plugin type {info.type!r} is not handled by this agent (only {DRA_PLUGIN_TYPE})"
        if not info.name:
            return "GetInfo names no driver"
        if pick_version(list(info.supported_versions)) is None:
            return f"driver {info.name}: none of the versions {list(info.supported_versions)} is supported"
        if not info.endpoint or not _is_socket(Path(info.endpoint)):
            return f"driver {info.name}: endpoint {info.endpoint!r} is not a socket"
        return None

    def unregister(self, socket_name: str) -> None:
        self._pending.discard(socket_name)
        name = self._by_socket.pop(socket_name, None)
        if name is None:
            return
        # The endpoint is the driver's DRA socket, not the registration socket that went away.
        client = self.registry.get(name)
        if client is not None and self.registry.remove(name, client.endpoint):
            log.info("DRA driver %s unregistered (its registration socket went away)", name)


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False
