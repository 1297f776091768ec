"""DeviceManager: the kubelet's device manager for the node agent (see the package docstring for the API)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from agent.devicemanager import checkpoint
from agent.devicemanager.endpoint import DEFAULT_RPC_TIMEOUT_S, PluginEndpoint, rpc_error_text
from agent.devicemanager.records import (
    AllocationError,
    ContainerAllocation,
    Device,
    PodInfo,
    PodRef,
    PreStartError,
    RegistrationEvent,
    ResourceStatus,
)
from agent.devicemanager.registration import (
    is_bare_file_name,
    is_serving,
    remove_stale_sockets,
    serve_registration,
    validate_register,
)
from agent.devicemanager.runoptions import RunOptions, merge_responses
from agent.devicemanager.selection import AskPreferred, select_devices
from deviceplugin.cpuset import parse_cpuset
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.deviceapi import DIAL_TIMEOUT_S, HEALTHY, KUBELET_SOCKET
from kubenode.grpcaio import AioServer
from kubenode.model.resources import is_extended_resource_name

log = logging.getLogger(__name__)

CPUSET_ENV = "KUBENODE_CPUSET"


@dataclass(frozen=True)
class DeviceEvent:
    """What a listener hears: a plugin `registered`, its `devices` changed, it `disconnected`, its resource
    `expired` (gone past the grace period), or devices were `allocated` (taking `seconds`)."""

    kind: str
    resource: str
    seconds: float = 0.0


@dataclass
class _Resource:
    name: str
    devices: dict[str, Device] = field(default_factory=dict)
    endpoint: PluginEndpoint | None = None
    stopped_at: float | None = None
    listed: bool = False
    restored: bool = False  # known from the checkpoint; its plugin has not registered since the restart


@dataclass
class _Held:
    """What one container holds: devices and the plugin's answer per resource, and the merged options."""

    pod: PodRef
    container: str
    devices: dict[str, tuple[str, ...]]
    numa: dict[str, dict[str, tuple[int, ...]]]
    responses: dict[str, api_pb2.ContainerAllocateResponse]
    options: RunOptions


@dataclass
class _Target:
    resource: str
    count: int
    endpoint: PluginEndpoint
    free: list[Device]


class DeviceManager:
    def __init__(
        self,
        plugin_dir: Path,
        state_dir: Path,
        *,
        stop_grace_period: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        podresources_socket: Path | None = None,
        on_register: Callable[[RegistrationEvent], None] | None = None,
        rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
        dial_timeout: float = DIAL_TIMEOUT_S,
        active_pods: Callable[[], Iterable[PodInfo]] | None = None,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.state_dir = Path(state_dir)
        self.stop_grace_period = stop_grace_period
        self.podresources_socket = podresources_socket
        self._clock = clock
        self._on_register = on_register
        self._rpc_timeout = rpc_timeout
        self._dial_timeout = dial_timeout
        # The agent's active pods, for PodResources List/Get; it may be set after construction, as the agent
        # that provides it is made after its device manager.
        self.active_pods = active_pods
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._alloc_lock = threading.Lock()
        self._resources: dict[str, _Resource] = {}
        self._held: dict[tuple[str, str], _Held] = {}
        self._reserved: dict[str, set[str]] = {}
        self._servers: list[grpc.Server | AioServer] = []
        self._stopping = False
        self._listeners: list[Callable[[DeviceEvent], None]] = []

    def add_listener(self, listener: Callable[[DeviceEvent], None]) -> None:
        """Call `listener` on every registration, device change, disconnect, expiry and allocation (from
        gRPC and worker threads, sometimes with the manager's lock held): keep it quick, e.g. set an event,
        and never call back into the manager from it."""
        self._listeners.append(listener)

    def _notify(self, kind: str, resource: str, seconds: float = 0.0) -> None:
        for listener in list(self._listeners):
            try:
                listener(DeviceEvent(kind, resource, seconds))
            except Exception:
                log.exception("device listener failed")

    @property
    def kubelet_socket(self) -> Path:
        return self.plugin_dir / KUBELET_SOCKET

    @property
    def checkpoint_path(self) -> Path:
        return self.state_dir / checkpoint.CHECKPOINT_NAME

    # ----- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Load the checkpoint, remove stale sockets, serve kubelet.sock (and the PodResources socket)."""
        self.plugin_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self.state_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self._restore()
        remove_stale_sockets(self.plugin_dir)
        # On grpc.aio: a plugin whose dial-back hangs holds its own Register, not a server worker.
        self._servers.append(serve_registration(self._handle_register, self.kubelet_socket))
        if self.podresources_socket is not None:
            from agent.devicemanager.podresources import serve_podresources

            self._servers.append(serve_podresources(self, self.podresources_socket))
        log.info("device manager serving %s", self.kubelet_socket)

    def stop(self) -> None:
        """Stop serving, end every plugin stream, remove our sockets. Allocations stay in the checkpoint."""
        with self._lock:
            self._stopping = True
            endpoints = [r.endpoint for r in self._resources.values() if r.endpoint is not None]
        for server in self._servers:
            server.stop(grace=1.0).wait()
        self._servers.clear()
        for endpoint in endpoints:
            endpoint.close()
        for path in (self.kubelet_socket, self.podresources_socket):
            if path is not None:
                path.unlink(missing_ok=True)

    # ----- registration and streams ----------------------------------------------------------------

    def _handle_register(self, request: api_pb2.RegisterRequest) -> str | None:
        at = self._clock()
        error = validate_register(request)
        socket_path = self.plugin_dir / request.endpoint
        # Probed even for a request about to be rejected, so conformance can report both problems.
        serving = is_bare_file_name(request.endpoint) and is_serving(socket_path)
        endpoint: PluginEndpoint | None = None
        if error is None:
            try:
                endpoint = PluginEndpoint.connect(
                    request.resource_name, socket_path, self._rpc_timeout, self._dial_timeout
                )
            except (TimeoutError, ConnectionError) as err:
                error = str(err)
        if endpoint is not None:
            error = self._attach(endpoint)
        if error is not None:
            log.warning("rejected registration of %r: %s", request.resource_name, error)
        else:
            log.info("registered %s at %s", request.resource_name, socket_path)
            self._notify("registered", request.resource_name)
        if self._on_register is not None:
            self._on_register(
                RegistrationEvent(
                    resource_name=request.resource_name,
                    version=request.version,
                    endpoint=request.endpoint,
                    request_pre_start_required=request.options.pre_start_required,
                    request_preferred_allocation=request.options.get_preferred_allocation_available,
                    serving_at_register=serving,
                    plugin_pre_start_required=endpoint.options.pre_start_required if endpoint else None,
                    plugin_preferred_allocation=(
                        endpoint.options.get_preferred_allocation_available if endpoint else None
                    ),
                    accepted=error is None,
                    error=error,
                    at=at,
                )
            )
        return error

    def _attach(self, endpoint: PluginEndpoint) -> str | None:
        """Make `endpoint` the resource's plugin (replacing any earlier one) and open its stream."""
        with self._lock:
            if self._stopping:
                endpoint.close()
                return "device manager is stopping"
            resource = self._resources.setdefault(endpoint.resource, _Resource(endpoint.resource))
            old = resource.endpoint
            resource.endpoint = endpoint
            resource.stopped_at = None
            resource.restored = False
            resource.listed = False
            endpoint.watch(self._on_update, self._on_stream_end)
        if old is not None:
            # Its stream end is ignored because it is no longer the resource's endpoint (kubernetes #121994).
            old.close()
        return None

    def _on_update(self, endpoint: PluginEndpoint, response: api_pb2.ListAndWatchResponse) -> None:
        with self._lock:
            resource = self._resources.get(endpoint.resource)
            if resource is None or resource.endpoint is not endpoint:
                return
            devices: dict[str, Device] = {}
            for d in response.devices:
                nodes = frozenset(int(n.ID) for n in d.topology.nodes)
                devices[d.ID] = Device(d.ID, d.health == HEALTHY, nodes)
            resource.devices = devices
            resource.listed = True
            self._save_locked()
            self._changed.notify_all()
        self._notify("devices", endpoint.resource)

    def _on_stream_end(self, endpoint: PluginEndpoint) -> None:
        with self._lock:
            resource = self._resources.get(endpoint.resource)
            if self._stopping or resource is None or resource.endpoint is not endpoint:
                return
            log.warning(
                "plugin of %s disconnected; its devices are unhealthy until it registers again", resource.name
            )
            resource.endpoint = None
            resource.stopped_at = self._clock()
            resource.devices = {i: Device(i, False, d.numa_nodes) for i, d in resource.devices.items()}
            self._save_locked()
            self._changed.notify_all()
        endpoint.close()
        self._notify("disconnected", endpoint.resource)

    def _expire_locked(self) -> None:
        now = self._clock()
        expired = [
            r.name
            for r in self._resources.values()
            if r.stopped_at is not None and now - r.stopped_at >= self.stop_grace_period
        ]
        for name in expired:
            log.info("dropping %s: its plugin has been gone for %.0f s", name, self.stop_grace_period)
            del self._resources[name]
        if expired:
            self._save_locked()
            self._changed.notify_all()
        for name in expired:
            self._notify("expired", name)

    # ----- counts and listings ---------------------------------------------------------------------

    def capacity(self) -> dict[str, int]:
        """Resource name -> every device the plugin advertised (healthy or not)."""
        with self._lock:
            self._expire_locked()
            return {n: len(r.devices) for n, r in self._resources.items()}

    def allocatable(self) -> dict[str, int]:
        """Resource name -> healthy devices (allocated ones included)."""
        with self._lock:
            self._expire_locked()
            return {n: sum(d.healthy for d in r.devices.values()) for n, r in self._resources.items()}

    def available(self) -> dict[str, int]:
        """Resource name -> healthy devices that no container holds."""
        with self._lock:
            self._expire_locked()
            return {n: len(self._free_locked(n)) for n in self._resources}

    def why_unavailable(self, name: str) -> str:
        """Why `name` has no devices to give yet, for the message of a pod that waits for it."""
        with self._lock:
            r = self._resources.get(name)
            if r is not None and r.restored:
                return (
                    f"the device plugin of {name} has not re-registered since the restart"
                    f" ({name} is known from the checkpoint only)"
                )
            if r is not None and r.endpoint is not None and not r.listed:
                return f"the device plugin of {name} has registered but not yet sent its devices"
        return f"no device plugin has registered {name} yet"

    def resources(self) -> list[ResourceStatus]:
        """Every known resource with its devices (ID, health, NUMA), sorted by name."""
        with self._lock:
            self._expire_locked()
            statuses = []
            for name in sorted(self._resources):
                r = self._resources[name]
                options = r.endpoint.options if r.endpoint else api_pb2.DevicePluginOptions()
                statuses.append(
                    ResourceStatus(
                        name=name,
                        devices=tuple(r.devices.values()),
                        connected=r.endpoint is not None,
                        endpoint=str(r.endpoint.socket_path) if r.endpoint else None,
                        pre_start_required=options.pre_start_required,
                        get_preferred_allocation_available=options.get_preferred_allocation_available,
                        allocated=len(self._taken_locked(name)),
                    )
                )
            return statuses

    def allocations(self) -> list[ContainerAllocation]:
        """Per pod and container: device IDs per resource, their NUMA nodes, CPU ids from KUBENODE_CPUSET."""
        with self._lock:
            return [
                ContainerAllocation(h.pod, h.container, dict(h.devices), dict(h.numa), _cpu_ids(h.options))
                for _, h in sorted(self._held.items())
            ]

    def wait_for_resource(self, name: str, timeout: float) -> bool:
        """Wait until `name` is registered and its plugin has sent its first device list."""

        def ready() -> bool:
            r = self._resources.get(name)
            return r is not None and r.endpoint is not None and r.listed

        with self._changed:
            return self._changed.wait_for(ready, timeout=timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until `predicate()` (called with the state lock held) is true after some state change."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout=timeout)

    # ----- allocation ------------------------------------------------------------------------------

    def allocate(
        self,
        pod: PodRef,
        container: str,
        requests: Mapping[str, int],
        numa_hint: frozenset[int] | None = None,
    ) -> RunOptions:
        """Allocate every device-plugin resource of one container; see the package docstring."""
        wanted = {r: int(n) for r, n in requests.items() if n > 0 and is_extended_resource_name(r)}
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
                held = _Held(
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

    def _cached_locked(self, held: _Held, wanted: Mapping[str, int]) -> RunOptions:
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

    def run_options(self, pod_uid: str, container: str) -> RunOptions | None:
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

    # ----- internals -------------------------------------------------------------------------------

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
                self._resources.setdefault(name, _Resource(name, stopped_at=now, restored=True))
            by_container: dict[tuple[str, str], list[checkpoint.Entry]] = {}
            for entry in saved.entries:
                by_container.setdefault((entry.pod_uid, entry.container), []).append(entry)
            for key, entries in by_container.items():
                first = entries[0]
                responses = {e.resource: e.response for e in entries}
                self._held[key] = _Held(
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


def _cpu_ids(options: RunOptions) -> tuple[int, ...]:
    text = options.envs.get(CPUSET_ENV)
    if not text:
        return ()
    try:
        return tuple(sorted(parse_cpuset(text)))
    except ValueError as err:
        log.warning("ignoring %s: %s", CPUSET_ENV, err)
        return ()
