"""Plugin registration and the plugins' streams: the device manager's endpoints (the kubelet's
devicemanager ManagerImpl: Register, its endpoint per resource and genericDeviceUpdateCallback).

Flow: a plugin's Register on kubelet.sock -> `handle_register`: the request is validated
(version, resource name, a bare socket file name), the manager dials the plugin back and asks
for its options -> `_attach` makes that endpoint the resource's (closing an earlier one, whose
stream end is then ignored) and opens ListAndWatch -> every list `_on_update`s the resource's
devices (health, NUMA) and is checkpointed -> a stream that ends `_on_stream_end`s: every
device turns unhealthy until the plugin registers again, and `expire_locked` drops the
resource after `stop_grace_period`. Listeners hear registered, devices, disconnected and
expired (and allocated, from agent/cm/devicemanager/allocation.py).

`PluginEndpoints` is one of DeviceManager's parts; the state it shares with them is state.DeviceTable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from agent.cm.devicemanager.endpoint import PluginEndpoint
from agent.cm.devicemanager.records import Device, RegistrationEvent
from agent.cm.devicemanager.registration import validate_register
from agent.cm.devicemanager.state import DeviceTable, ResourceState
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.deviceapi import HEALTHY, is_bare_file_name
from kubenode.deviceplugin_client import is_serving

log = logging.getLogger("agent.cm.devicemanager.manager")


class PluginEndpoints:
    def __init__(
        self,
        table: DeviceTable,
        plugin_dir: Path,
        *,
        stop_grace_period: float,
        clock: Callable[[], float],
        on_register: Callable[[RegistrationEvent], None] | None,
        rpc_timeout: float,
        dial_timeout: float,
    ) -> None:
        self.table = table
        self.plugin_dir = plugin_dir
        self.stop_grace_period = stop_grace_period
        self._clock = clock
        self._on_register = on_register
        self._rpc_timeout = rpc_timeout
        self._dial_timeout = dial_timeout

    def handle_register(self, request: api_pb2.RegisterRequest) -> str | None:
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
            self.table.notify("registered", request.resource_name)
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
        with self.table.lock:
            if self.table.stopping:
                endpoint.close()
                return "device manager is stopping"
            resource = self.table.resources.setdefault(endpoint.resource, ResourceState(endpoint.resource))
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
        with self.table.lock:
            resource = self.table.resources.get(endpoint.resource)
            if resource is None or resource.endpoint is not endpoint:
                return
            devices: dict[str, Device] = {}
            for d in response.devices:
                nodes = frozenset(int(n.ID) for n in d.topology.nodes)
                devices[d.ID] = Device(d.ID, d.health == HEALTHY, nodes)
            resource.devices = devices
            resource.listed = True
            self.table.save_locked()
            self.table.changed.notify_all()
        self.table.notify("devices", endpoint.resource)

    def _on_stream_end(self, endpoint: PluginEndpoint) -> None:
        with self.table.lock:
            resource = self.table.resources.get(endpoint.resource)
            if self.table.stopping or resource is None or resource.endpoint is not endpoint:
                return
            log.warning(
                "plugin of %s disconnected; its devices are unhealthy until it registers again", resource.name
            )
            resource.endpoint = None
            resource.stopped_at = self._clock()
            resource.devices = {i: Device(i, False, d.numa_nodes) for i, d in resource.devices.items()}
            self.table.save_locked()
            self.table.changed.notify_all()
        endpoint.close()
        self.table.notify("disconnected", endpoint.resource)

    def expire_locked(self) -> None:
        now = self._clock()
        expired = [
            r.name
            for r in self.table.resources.values()
            if r.stopped_at is not None and now - r.stopped_at >= self.stop_grace_period
        ]
        for name in expired:
            log.info("dropping %s: its plugin has been gone for %.0f s", name, self.stop_grace_period)
            del self.table.resources[name]
        if expired:
            self.table.save_locked()
            self.table.changed.notify_all()
        for name in expired:
            self.table.notify("expired", name)
