"""DeviceManager: the kubelet's device manager for the node agent (see the package docstring for the API).

Flow: `start` restores the checkpoint, removes stale sockets and serves kubelet.sock (and the
PodResources socket) -> plugins register and stream their devices (agent/cm/devicemanager/plugins.py)
-> the agent's syncs allocate per container (agent/cm/devicemanager/allocation.py) -> the counts and
listings here (capacity, allocatable, available, resources, allocations) feed admission, the
node status and `kubenode agent`'s tables -> `stop` ends the streams and removes the sockets,
leaving the allocations in the checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from agent.cm.devicemanager.allocation import Allocator, cpu_ids
from agent.cm.devicemanager.endpoint import DEFAULT_RPC_TIMEOUT_S
from agent.cm.devicemanager.plugins import PluginEndpoints
from agent.cm.devicemanager.records import (
    ContainerAllocation,
    PodInfo,
    PodRef,
    RegistrationEvent,
    ResourceStatus,
)
from agent.cm.devicemanager.registration import remove_stale_sockets, serve_registration
from agent.cm.devicemanager.state import DeviceEvent, DeviceTable
from agent.container.resources import ContainerResources
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.deviceapi import DIAL_TIMEOUT_S, KUBELET_SOCKET
from kubenode.grpcaio import AioServer

if TYPE_CHECKING:
    from agent.cm.devicemanager.podresources import DynamicLookup

log = logging.getLogger(__name__)


class DeviceManager:
    """The device manager: its lifecycle, counts and listings, over its parts: registration and streams
    (plugins.py), allocation (allocation.py), and the state they share with the checkpoint (state.py)."""

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
        dynamic_resources: DynamicLookup | None = None,
    ) -> None:
        self.plugin_dir = Path(plugin_dir)
        self.dynamic_resources = dynamic_resources  # PodResources' DRA claims (agent/cm/dra/podresources.py)
        self.state_dir = Path(state_dir)
        self.podresources_socket = podresources_socket
        # The agent's active pods, for PodResources List/Get; given to start() by an agent, which is made
        # after its device manager (the kubelet's ContainerManager.Start(activePods) likewise).
        self.active_pods = active_pods
        self.table = DeviceTable(self.state_dir, clock)
        self.plugins = PluginEndpoints(
            self.table,
            self.plugin_dir,
            stop_grace_period=stop_grace_period,
            clock=clock,
            on_register=on_register,
            rpc_timeout=rpc_timeout,
            dial_timeout=dial_timeout,
        )
        self.allocator = Allocator(self.table, self.plugins.expire_locked)
        self._servers: list[grpc.Server | AioServer] = []

    @property
    def checkpoint_path(self) -> Path:
        return self.table.checkpoint_path

    @property
    def kubelet_socket(self) -> Path:
        return self.plugin_dir / KUBELET_SOCKET

    # ----- lifecycle -------------------------------------------------------------------------------

    def start(self, active_pods: Callable[[], Iterable[PodInfo]] | None = None) -> None:
        """Load the checkpoint, remove stale sockets, serve kubelet.sock (and the PodResources socket)."""
        if active_pods is not None:
            self.active_pods = active_pods
        self.plugin_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self.state_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
        self.table.restore()
        remove_stale_sockets(self.plugin_dir)
        # On grpc.aio: a plugin whose dial-back hangs holds its own Register, not a server worker.
        self._servers.append(serve_registration(self.plugins.handle_register, self.kubelet_socket))
        if self.podresources_socket is not None:
            from agent.cm.devicemanager.podresources import serve_podresources

            self._servers.append(serve_podresources(self, self.podresources_socket, self.dynamic_resources))
        log.info("device manager serving %s", self.kubelet_socket)

    def stop(self) -> None:
        """Stop serving, end every plugin stream, remove our sockets. Allocations stay in the checkpoint."""
        with self.table.lock:
            self.table.stopping = True
            endpoints = [r.endpoint for r in self.table.resources.values() if r.endpoint is not None]
        for server in self._servers:
            server.stop(grace=1.0).wait()
        self._servers.clear()
        for endpoint in endpoints:
            endpoint.close()
        for path in (self.kubelet_socket, self.podresources_socket):
            if path is not None:
                path.unlink(missing_ok=True)

    # ----- the parts' calls, as the package API names them ---------------------------------------------

    def add_listener(self, listener: Callable[[DeviceEvent], None]) -> None:
        self.table.add_listener(listener)

    def allocate(
        self,
        pod: PodRef,
        container: str,
        requests: Mapping[str, int],
        numa_hint: frozenset[int] | None = None,
    ) -> ContainerResources:
        return self.allocator.allocate(pod, container, requests, numa_hint)

    def pre_start(self, pod_uid: str, container: str) -> None:
        self.allocator.pre_start(pod_uid, container)

    def run_options(self, pod_uid: str, container: str) -> ContainerResources | None:
        return self.allocator.run_options(pod_uid, container)

    def free_pod(self, pod_uid: str) -> None:
        self.allocator.free_pod(pod_uid)

    def retain_pods(self, live_pod_uids: Collection[str]) -> None:
        self.allocator.retain_pods(live_pod_uids)

    # ----- counts and listings ---------------------------------------------------------------------

    def capacity(self) -> dict[str, int]:
        """Resource name -> every device the plugin advertised (healthy or not)."""
        with self.table.lock:
            self.plugins.expire_locked()
            return {n: len(r.devices) for n, r in self.table.resources.items()}

    def allocatable(self) -> dict[str, int]:
        """Resource name -> healthy devices (allocated ones included)."""
        with self.table.lock:
            self.plugins.expire_locked()
            return {n: sum(d.healthy for d in r.devices.values()) for n, r in self.table.resources.items()}

    def available(self) -> dict[str, int]:
        """Resource name -> healthy devices that no container holds."""
        with self.table.lock:
            self.plugins.expire_locked()
            return {n: len(self.table.free_locked(n)) for n in self.table.resources}

    def why_unavailable(self, name: str) -> str:
        """Why `name` has no devices to give yet, for the message of a pod that waits for it."""
        with self.table.lock:
            r = self.table.resources.get(name)
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
        with self.table.lock:
            self.plugins.expire_locked()
            statuses = []
            for name in sorted(self.table.resources):
                r = self.table.resources[name]
                options = r.endpoint.options if r.endpoint else api_pb2.DevicePluginOptions()
                statuses.append(
                    ResourceStatus(
                        name=name,
                        devices=tuple(r.devices.values()),
                        connected=r.endpoint is not None,
                        endpoint=str(r.endpoint.socket_path) if r.endpoint else None,
                        pre_start_required=options.pre_start_required,
                        get_preferred_allocation_available=options.get_preferred_allocation_available,
                        allocated=len(self.table.taken_locked(name)),
                    )
                )
            return statuses

    def allocations(self) -> list[ContainerAllocation]:
        """Per pod and container: device IDs per resource, their NUMA nodes, CPU ids from KUBENODE_CPUSET."""
        with self.table.lock:
            return [
                ContainerAllocation(h.pod, h.container, dict(h.devices), dict(h.numa), cpu_ids(h.options))
                for _, h in sorted(self.table.held.items())
            ]

    def wait_for_resource(self, name: str, timeout: float) -> bool:
        """Wait until `name` is registered and its plugin has sent its first device list."""

        def ready() -> bool:
            r = self.table.resources.get(name)
            return r is not None and r.endpoint is not None and r.listed

        with self.table.changed:
            return self.table.changed.wait_for(ready, timeout=timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until `predicate()` (called with the state lock held) is true after some state change."""
        with self.table.changed:
            return self.table.changed.wait_for(predicate, timeout=timeout)
