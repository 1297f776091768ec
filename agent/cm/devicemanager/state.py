"""The device manager's state, shared by its parts, and its checkpoint.

Registration and the plugins' streams (plugins.py) keep `resources`; allocation (allocation.py) keeps
`held` and `reserved`; the manager (manager.py) reads both for its counts and listings. One re-entrant lock
guards all of it, and `changed` is notified on every change. `save_locked` writes the checkpoint
(`<state_dir>/kubenode_device_checkpoint.json`: holdings and registered resources), `restore` reads it at
start. Listeners hear registered, devices, disconnected, expired and allocated.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.cm.devicemanager import checkpoint
from agent.cm.devicemanager.endpoint import PluginEndpoint
from agent.cm.devicemanager.records import Device, PodRef
from agent.cm.devicemanager.runoptions import merge_responses
from agent.container.resources import ContainerResources
from kubenode.api.deviceplugin.v1beta1 import api_pb2

log = logging.getLogger("agent.cm.devicemanager.manager")


@dataclass(frozen=True)
class DeviceEvent:
    """What a listener hears: a plugin `registered`, its `devices` changed, it `disconnected`, its resource
    `expired` (gone past the grace period), or devices were `allocated` (taking `seconds`)."""

    kind: str
    resource: str
    seconds: float = 0.0


@dataclass
class ResourceState:
    name: str
    devices: dict[str, Device] = field(default_factory=dict)
    endpoint: PluginEndpoint | None = None
    stopped_at: float | None = None
    listed: bool = False
    restored: bool = False  # known from the checkpoint; its plugin has not registered since the restart


@dataclass
class Holding:
    """What one container holds: devices and the plugin's answer per resource, and the merged options."""

    pod: PodRef
    container: str
    devices: dict[str, tuple[str, ...]]
    numa: dict[str, dict[str, tuple[int, ...]]]
    responses: dict[str, api_pb2.ContainerAllocateResponse]
    options: ContainerResources


class DeviceTable:
    def __init__(self, state_dir: Path, clock: Callable[[], float]) -> None:
        self.checkpoint_path = Path(state_dir) / checkpoint.CHECKPOINT_NAME
        self._clock = clock
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.resources: dict[str, ResourceState] = {}
        self.held: dict[tuple[str, str], Holding] = {}
        self.reserved: dict[str, set[str]] = {}
        self.stopping = False
        self.listeners: list[Callable[[DeviceEvent], None]] = []

    def add_listener(self, listener: Callable[[DeviceEvent], None]) -> None:
        """Call `listener` on every registration, device change, disconnect, expiry and allocation (from
        gRPC and worker threads, sometimes with the manager's lock held): keep it quick, e.g. set an event,
        and never call back into the manager from it."""
        self.listeners.append(listener)

    def notify(self, kind: str, resource: str, seconds: float = 0.0) -> None:
        for listener in list(self.listeners):
            try:
                listener(DeviceEvent(kind, resource, seconds))
            except Exception:
                log.exception("device listener failed")

    def taken_locked(self, resource: str) -> set[str]:
        taken = set(self.reserved.get(resource, ()))
        for held in self.held.values():
            taken.update(held.devices.get(resource, ()))
        return taken

    def free_locked(self, resource: str) -> list[Device]:
        taken = self.taken_locked(resource)
        return [d for d in self.resources[resource].devices.values() if d.healthy and d.id not in taken]

    def save_locked(self) -> None:
        entries = [
            checkpoint.Entry(
                pod_uid=h.pod.uid,
                namespace=h.pod.namespace,
                pod_name=h.pod.name,
                container=h.container,
                resource=resource,
                device_ids=list(ids),
                numa={i: list(n) for i, n in h.numa.get(resource, {}).items()},
                response=h.responses[resource],
            )
            for h in self.held.values()
            for resource, ids in h.devices.items()
        ]
        registered = {n: [i for i, d in r.devices.items() if d.healthy] for n, r in self.resources.items()}
        try:
            checkpoint.save(self.checkpoint_path, checkpoint.Checkpoint(entries, registered))
        except OSError as err:
            log.error("cannot write checkpoint %s: %s", self.checkpoint_path, err)

    def restore(self) -> None:
        try:
            saved = checkpoint.load(self.checkpoint_path)
        except checkpoint.CheckpointError as err:
            moved = checkpoint.quarantine(self.checkpoint_path)
            log.error(
                "%s; moved to %s, continuing without it, device allocations may be out of date", err, moved
            )
            return
        now = self._clock()
        with self.lock:
            for name in saved.registered:
                # As the kubelet does: a resource from the checkpoint has no devices and a stopped endpoint
                # until its plugin registers again, and is dropped after the grace period.
                self.resources.setdefault(name, ResourceState(name, stopped_at=now, restored=True))
            by_container: dict[tuple[str, str], list[checkpoint.Entry]] = {}
            for entry in saved.entries:
                by_container.setdefault((entry.pod_uid, entry.container), []).append(entry)
            for key, entries in by_container.items():
                first = entries[0]
                responses = {e.resource: e.response for e in entries}
                self.held[key] = Holding(
                    pod=PodRef(first.pod_uid, first.namespace, first.pod_name),
                    container=first.container,
                    devices={e.resource: tuple(e.device_ids) for e in entries},
                    numa={e.resource: {i: tuple(n) for i, n in e.numa.items()} for e in entries},
                    responses=responses,
                    options=merge_responses(sorted(responses.items())),
                )
        if saved.entries or saved.registered:
            log.info(
                "restored %d allocation(s) and %d resource(s) from %s",
                len(saved.entries),
                len(saved.registered),
                self.checkpoint_path,
            )
