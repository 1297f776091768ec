"""Allocation: which devices a container gets, the plugins' Allocate and PreStartContainer, and the
checkpoint (the kubelet's devicemanager allocateContainerResources, devicesToAllocate, checkpoint).

Flow of `allocate(pod, container, requests)`: a container that already holds devices gets the
cached answer (a changed count is an error: it needs a new container) -> per resource, a target
with the plugin's endpoint and its healthy free devices (unregistered, all unhealthy or
disconnected: AllocationError) -> devices chosen by agent/cm/devicemanager/selection.py (NUMA hint,
the plugin's GetPreferredAllocation when it offers one), reserved while the plugin is asked ->
Allocate per resource -> the answers merged into ContainerResources (envs, device nodes, mounts, CDI),
held per (pod, container) and checkpointed. `pre_start` calls PreStartContainer where a plugin
asked for it; `free_pod`/`retain_pods` drop holdings. `_save_locked` writes the checkpoint
(holdings and registered resources); `_restore` reads it at start.

`Allocator` is DeviceManager's second part (after agent/cm/devicemanager/plugins.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

from agent.cm.devicemanager import checkpoint
from agent.cm.devicemanager.endpoint import PluginEndpoint, rpc_error_text
from agent.cm.devicemanager.plugins import PluginEndpoints, ResourceState
from agent.cm.devicemanager.records import AllocationError, Device, PodRef, PreStartError
from agent.cm.devicemanager.runoptions import merge_responses
from agent.cm.devicemanager.selection import AskPreferred, select_devices
from agent.container.resources import ContainerResources
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.cpuset import parse_cpuset
from kubenode.devicecontract import CPUSET_ENV, device_plugin_limits

log = logging.getLogger("agent.cm.devicemanager.manager")


@dataclass
class Holding:
    """What one container holds: devices and the plugin's answer per resource, and the merged options."""

    pod: PodRef
    container: str
    devices: dict[str, tuple[str, ...]]
    numa: dict[str, dict[str, tuple[int, ...]]]
    responses: dict[str, api_pb2.ContainerAllocateResponse]
    options: ContainerResources


@dataclass
class _Target:
    resource: str
    count: int
    endpoint: PluginEndpoint
    free: list[Device]


class Allocator(PluginEndpoints):
    state_dir: Path
    _alloc_lock: threading.Lock
    _held: dict[tuple[str, str], Holding]
    _reserved: dict[str, set[str]]

    @property
    def checkpoint_path(self) -> Path:
        return self.state_dir / checkpoint.CHECKPOINT_NAME

    def allocate(
        self,
        pod: PodRef,
        container: str,
        requests: Mapping[str, int],
        numa_hint: frozenset[int] | None = None,
    ) -> ContainerResources:
        """Allocate every device-plugin resource of one container; see the package docstring."""
        wanted = device_plugin_limits(requests)
        key = (pod.uid, container)
        started = time.monotonic()
        with self._alloc_lock:
            with self._lock:
                held = self._held.get(key)
                if held is not None:
                    return self._cached_locked(held, wanted)
                self._expire_locked()
                targets = [self._target_locked(r, n) for r, n in sorted(wanted.items())]
            chosen: dict[str, list[str]] = {}
            try:
                for target in targets:
                    ids = select_devices(
                        target.resource, target.free, target.count, numa_hint, _asker(target)
                    )
                    with self._lock:
                        self._reserved.setdefault(target.resource, set()).update(ids)
                    chosen[target.resource] = ids
                responses = {t.resource: self._call_allocate(t, chosen[t.resource]) for t in targets}
            finally:
                with self._lock:
                    for resource, ids in chosen.items():
                        self._reserved[resource].difference_update(ids)
            with self._lock:
                numa = {t.resource: {d.id: tuple(sorted(d.numa_nodes)) for d in t.free} for t in targets}
                held = Holding(
                    pod=pod,
                    container=container,
                    devices={r: tuple(ids) for r, ids in chosen.items()},
                    numa={r: {i: numa[r][i] for i in ids} for r, ids in chosen.items()},
                    responses=responses,
                    options=merge_responses(sorted(responses.items())),
                )
                self._held[key] = held
                self._save_locked()
                self._changed.notify_all()
            for resource in chosen:
                self._notify("allocated", resource, time.monotonic() - started)
            return held.options

    def _cached_locked(self, held: Holding, wanted: Mapping[str, int]) -> ContainerResources:
        counts = {r: len(ids) for r, ids in held.devices.items()}
        if counts != dict(wanted):
            raise AllocationError(
                f"container {held.container} of pod {held.pod.uid} already holds {counts}; "
                f"a changed request {dict(wanted)} needs a new container"
            )
        return held.options

    def _target_locked(self, resource: str, count: int) -> _Target:
        state = self._resources.get(resource)
        if state is None:
            raise AllocationError(f"cannot allocate unregistered device {resource} (requested {count})")
        if not any(d.healthy for d in state.devices.values()):
            raise AllocationError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        if state.endpoint is None:
            raise AllocationError(
                f"the plugin of {resource} is not connected; cannot allocate {count} device(s)"
            )
        return _Target(resource, count, state.endpoint, self._free_locked(resource))

    def _call_allocate(self, target: _Target, ids: list[str]) -> api_pb2.ContainerAllocateResponse:
        try:
            return target.endpoint.allocate(ids)
        except grpc.RpcError as err:
            reason = rpc_error_text(err)
        except ValueError as err:
            reason = str(err)
        raise AllocationError(f"Allocate failed for {target.resource} (devices {', '.join(ids)}): {reason}")

    def pre_start(self, pod_uid: str, container: str) -> None:
        """PreStartContainer (30 s deadline) for every resource of the container whose plugin requires it."""
        with self._lock:
            held = self._held.get((pod_uid, container))
            if held is None:
                return
            calls = []
            for resource, ids in held.devices.items():
                state = self._resources.get(resource)
                if state is None or state.endpoint is None:
                    raise PreStartError(f"endpoint not found in cache for a registered resource: {resource}")
                if state.endpoint.options.pre_start_required:
                    calls.append((resource, state.endpoint, ids))
        for resource, endpoint, ids in calls:
            try:
                endpoint.pre_start(ids)
            except grpc.RpcError as err:
                raise PreStartError(
                    f"PreStartContainer for {resource} (devices {', '.join(ids)}) of container {container} "
                    f"in pod {pod_uid} failed: {rpc_error_text(err)}"
                ) from None

    def run_options(self, pod_uid: str, container: str) -> ContainerResources | None:
        with self._lock:
            held = self._held.get((pod_uid, container))
            return held.options if held else None

    def free_pod(self, pod_uid: str) -> None:
        self._free_pods(lambda uid: uid == pod_uid)

    def retain_pods(self, live_pod_uids: Collection[str]) -> None:
        """Free the devices of every pod not in `live_pod_uids`."""
        live = set(live_pod_uids)
        self._free_pods(lambda uid: uid not in live)

    def _free_pods(self, gone: Callable[[str], bool]) -> None:
        """Drop the holdings of every pod for which `gone(uid)`; one checkpoint write for all of them."""
        with self._lock:
            keys = [k for k in self._held if gone(k[0])]
            for k in keys:
                del self._held[k]
            if keys:
                self._save_locked()
                self._changed.notify_all()

    def _taken_locked(self, resource: str) -> set[str]:
        taken = set(self._reserved.get(resource, ()))
        for held in self._held.values():
            taken.update(held.devices.get(resource, ()))
        return taken

    def _free_locked(self, resource: str) -> list[Device]:
        taken = self._taken_locked(resource)
        return [d for d in self._resources[resource].devices.values() if d.healthy and d.id not in taken]

    def _save_locked(self) -> None:
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
            for h in self._held.values()
            for resource, ids in h.devices.items()
        ]
        registered = {n: [i for i, d in r.devices.items() if d.healthy] for n, r in self._resources.items()}
        try:
            checkpoint.save(self.checkpoint_path, checkpoint.Checkpoint(entries, registered))
        except OSError as err:
            log.error("cannot write checkpoint %s: %s", self.checkpoint_path, err)

    def _restore(self) -> None:
        try:
            saved = checkpoint.load(self.checkpoint_path)
        except checkpoint.CheckpointError as err:
            moved = checkpoint.quarantine(self.checkpoint_path)
            log.error(
                "%s; moved to %s, continuing without it, device allocations may be out of date", err, moved
            )
            return
        now = self._clock()
        with self._lock:
            for name in saved.registered:
                # As the kubelet does: a resource from the checkpoint has no devices and a stopped endpoint
                # until its plugin registers again, and is dropped after the grace period.
                self._resources.setdefault(name, ResourceState(name, stopped_at=now, restored=True))
            by_container: dict[tuple[str, str], list[checkpoint.Entry]] = {}
            for entry in saved.entries:
                by_container.setdefault((entry.pod_uid, entry.container), []).append(entry)
            for key, entries in by_container.items():
                first = entries[0]
                responses = {e.resource: e.response for e in entries}
                self._held[key] = Holding(
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


def _asker(target: _Target) -> AskPreferred | None:
    if not target.endpoint.options.get_preferred_allocation_available:
        return None
    endpoint = target.endpoint

    def ask(available: list[str], must_include: list[str], size: int) -> list[str]:
        try:
            return endpoint.preferred(available, must_include, size)
        except grpc.RpcError as err:
            raise AllocationError(
                f"GetPreferredAllocation failed for {target.resource} (requested {size}): "
                f"{rpc_error_text(err)}"
            ) from None

    return ask


def cpu_ids(options: ContainerResources) -> tuple[int, ...]:
    text = options.envs.get(CPUSET_ENV)
    if not text:
        return ()
    try:
        return tuple(sorted(parse_cpuset(text)))
    except ValueError as err:
        log.warning("ignoring %s: %s", CPUSET_ENV, err)
        return ()
