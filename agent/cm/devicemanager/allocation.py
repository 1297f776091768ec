"""Allocation: which devices a container gets, the plugins' Allocate and PreStartContainer, and the
checkpoint (the kubelet's devicemanager allocateContainerResources, devicesToAllocate, checkpoint).

Flow of `allocate(pod, container, requests)`: a container that already holds devices gets the
cached answer (a changed count is an error: it needs a new container) -> per resource, a target
with the plugin's endpoint and its healthy free devices (unregistered, all unhealthy or
disconnected: AllocationError) -> devices chosen by agent/cm/devicemanager/selection.py (NUMA hint,
the plugin's GetPreferredAllocation when it offers one), reserved while the plugin is asked ->
Allocate per resource -> the answers merged into ContainerResources (envs, device nodes, mounts, CDI),
held per (pod, container) and checkpointed. `pre_start` calls PreStartContainer where a plugin
asked for it; `free_pod`/`retain_pods` drop holdings. The checkpoint is written
by state.DeviceTable.

`Allocator` is one of DeviceManager's parts; the state it shares with them is state.DeviceTable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import grpc

from agent.cm.devicemanager.endpoint import PluginEndpoint
from agent.cm.devicemanager.records import AllocationError, Device, PodRef, PreStartError
from agent.cm.devicemanager.runoptions import merge_responses
from agent.cm.devicemanager.selection import AskPreferred, select_devices
from agent.cm.devicemanager.state import DeviceTable, Holding
from agent.container.resources import ContainerResources
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.cpuset import parse_cpuset
from kubenode.devicecontract import CPUSET_ENV, device_plugin_limits
from kubenode.deviceplugin_client import rpc_error_text

log = logging.getLogger("agent.cm.devicemanager.manager")


@dataclass
class _Target:
    resource: str
    count: int
    endpoint: PluginEndpoint
    free: list[Device]


class Allocator:
    def __init__(self, table: DeviceTable, expire_locked: Callable[[], None]) -> None:
        self.table = table
        self._expire_locked = expire_locked  # resources whose plugin is gone past the grace period dropped
        self._alloc_lock = threading.Lock()

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
            with self.table.lock:
                held = self.table.held.get(key)
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
                    with self.table.lock:
                        self.table.reserved.setdefault(target.resource, set()).update(ids)
                    chosen[target.resource] = ids
                responses = {t.resource: self._call_allocate(t, chosen[t.resource]) for t in targets}
            finally:
                with self.table.lock:
                    for resource, ids in chosen.items():
                        self.table.reserved[resource].difference_update(ids)
            with self.table.lock:
                numa = {t.resource: {d.id: tuple(sorted(d.numa_nodes)) for d in t.free} for t in targets}
                held = Holding(
                    pod=pod,
                    container=container,
                    devices={r: tuple(ids) for r, ids in chosen.items()},
                    numa={r: {i: numa[r][i] for i in ids} for r, ids in chosen.items()},
                    responses=responses,
                    options=merge_responses(sorted(responses.items())),
                )
                self.table.held[key] = held
                self.table.save_locked()
                self.table.changed.notify_all()
            for resource in chosen:
                self.table.notify("allocated", resource, time.monotonic() - started)
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
        state = self.table.resources.get(resource)
        if state is None:
            raise AllocationError(f"cannot allocate unregistered device {resource} (requested {count})")
        if not any(d.healthy for d in state.devices.values()):
            raise AllocationError(f"no healthy devices present; cannot allocate unhealthy devices {resource}")
        if state.endpoint is None:
            raise AllocationError(
                f"the plugin of {resource} is not connected; cannot allocate {count} device(s)"
            )
        return _Target(resource, count, state.endpoint, self.table.free_locked(resource))

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
        with self.table.lock:
            held = self.table.held.get((pod_uid, container))
            if held is None:
                return
            calls = []
            for resource, ids in held.devices.items():
                state = self.table.resources.get(resource)
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
        with self.table.lock:
            held = self.table.held.get((pod_uid, container))
            return held.options if held else None

    def free_pod(self, pod_uid: str) -> None:
        self._free_pods(lambda uid: uid == pod_uid)

    def retain_pods(self, live_pod_uids: Collection[str]) -> None:
        """Free the devices of every pod not in `live_pod_uids`."""
        live = set(live_pod_uids)
        self._free_pods(lambda uid: uid not in live)

    def _free_pods(self, gone: Callable[[str], bool]) -> None:
        """Drop the holdings of every pod for which `gone(uid)`; one checkpoint write for all of them."""
        with self.table.lock:
            keys = [k for k in self.table.held if gone(k[0])]
            for k in keys:
                del self.table.held[k]
            if keys:
                self.table.save_locked()
                self.table.changed.notify_all()


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
