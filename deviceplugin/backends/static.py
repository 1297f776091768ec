"""Devices declared in the config: for machines without the hardware, demos and tests.

Health can be flipped at run time through a control file (each line an unhealthy
device ID; watched with inotify, so a change reaches ListAndWatch at once) or
in-process with `set_health`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from deviceplugin.backend import Backend, ContainerAllocation, Device, OnChange
from deviceplugin.config import StaticOptions
from kubenode.dirwatch import DirWatcher
from kubenode.repeatlog import RepeatedWarning

log = logging.getLogger(__name__)

WATCH_RETRY_S = 1.0  # pause after a failed round, so a persistent error cannot spin the thread


class StaticBackend(Backend):
    allocate_blocks = False  # the declared devices' env, nodes and mounts, from memory

    def __init__(self, options: StaticOptions, kubelet_dir: str) -> None:
        self._declared = {d.id: d for d in options.devices}
        self._config_unhealthy = {d.id for d in options.devices if not d.healthy}
        self._set_unhealthy: set[str] = set()
        self._file_unhealthy: set[str] = set()
        self._lock = threading.Lock()
        self._on_change: OnChange = lambda: None
        self.health_file = Path(kubelet_dir, options.health_file) if options.health_file else None
        self._watcher: DirWatcher | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        # Two static resources may share one health file: each then sees the other's IDs on every change.
        self._unknown = RepeatedWarning(log, "%s names unknown device %r; ignored")

    def devices(self) -> list[Device]:
        with self._lock:
            unhealthy = self._config_unhealthy | self._set_unhealthy | self._file_unhealthy
        return [Device(d.id, d.id not in unhealthy, d.numa_nodes) for d in self._declared.values()]

    def set_health(self, device_id: str, healthy: bool) -> None:
        """In-process health switch (tests, embedding)."""
        if device_id not in self._declared:
            raise KeyError(f"unknown static device {device_id!r}")
        with self._lock:
            (self._set_unhealthy.discard if healthy else self._set_unhealthy.add)(device_id)
        self._on_change()

    def allocate(self, ids: Sequence[str]) -> ContainerAllocation:
        result = ContainerAllocation()
        for device_id in ids:
            device = self._declared[device_id]
            result.merge(
                ContainerAllocation(
                    envs=dict(device.env),
                    device_nodes=list(device.device_nodes),
                    mounts=list(device.mounts),
                    cdi_devices=list(device.cdi_devices),
                )
            )
        return result

    def start(self, on_change: OnChange) -> None:
        self._on_change = on_change
        if self.health_file is None:
            return
        self.health_file.parent.mkdir(parents=True, exist_ok=True)
        self._watcher = DirWatcher(self.health_file.parent, modify=True)
        self._read_health_file()
        self._thread = threading.Thread(target=self._watch, name="static-health", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None and self._thread is not None:
            self._watcher.wake()
            self._thread.join()
            self._watcher.close()
            self._watcher = self._thread = None
        self._unknown.close()

    def _watch(self) -> None:
        assert self._watcher is not None and self.health_file is not None
        name = self.health_file.name
        while not self._stopping.is_set():
            # One bad round (a callback that raises, an undecodable file) must not end health reporting.
            try:
                events = self._watcher.read()
                if any(e.name in (name, "") for e in events) and self._read_health_file():
                    self._on_change()
            except Exception:
                log.exception("static health watcher for %s failed; still watching", self.health_file)
                self._stopping.wait(WATCH_RETRY_S)

    def _read_health_file(self) -> bool:
        """Reload the control file; returns whether the unhealthy set changed."""
        assert self.health_file is not None
        try:
            lines = self.health_file.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        except OSError as exc:
            log.warning("static health file %s unreadable: %s", self.health_file, exc)
            return False
        wanted = {line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")}
        for device_id in sorted(wanted - self._declared.keys()):
            self._unknown.warn(device_id, self.health_file, device_id)
        wanted &= self._declared.keys()
        with self._lock:
            changed = wanted != self._file_unhealthy
            self._file_unhealthy = wanted
        return changed
