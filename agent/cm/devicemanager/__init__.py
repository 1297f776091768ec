"""The kubelet-side device manager, for the node agent: plugins register here and containers get devices here.

It follows the kubelet's documented behaviour (see docs/devicemanager.md):

- `start()` removes stale sockets in `plugin_dir` (sockets only), serves `Registration` on `kubelet.sock`, and
  the PodResources v1 service on `podresources_socket` when given; it first loads its own checkpoint
  `<state_dir>/kubenode_device_checkpoint.json`.
- Register is validated like the kubelet's (version `v1beta1`, extended resource name, endpoint a bare file
  name); the manager dials back (10 s), calls GetDevicePluginOptions (those options are the ones used), opens
  ListAndWatch, and only then answers. Rejections carry the kubelet's messages with gRPC code UNKNOWN.
- Each ListAndWatch message replaces the resource's device list. When a stream ends, every device of that
  resource is unhealthy and the resource is dropped after `stop_grace_period` seconds (on `clock`). A new
  registration of a resource replaces the old plugin; the old stream's end does not affect the new one.

API (all methods are thread-safe):

    DeviceManager(plugin_dir, state_dir, *, stop_grace_period=300.0, clock=time.monotonic,
                  podresources_socket=None, on_register=None, rpc_timeout=60.0,
                  dial_timeout=10.0, active_pods=None)
    start(active_pods=None) / stop()
    capacity() / allocatable() / available() -> dict[str, int]
    resources() -> list[ResourceStatus]          # devices (ID, health, NUMA), connected, options, allocated
    describe_resources(dm.resources()) -> str    # a printable table of the same (devicemanager.listing)
    allocate(pod, container, requests, numa_hint=None) -> ContainerResources
        # every device-plugin (extended) resource of the container at once; other names (cpu, memory) are
        # ignored; idempotent for a container that already holds devices; AllocationError rolls back
    pre_start(pod_uid, container)                # PreStartContainer (30 s) where the plugin requires it
    run_options(pod_uid, container) -> ContainerResources | None
    free_pod(pod_uid) / retain_pods(live_pod_uids)
    allocations() -> list[ContainerAllocation]   # pod, container, resource -> IDs, NUMA per ID, cpu_ids
    wait_for_resource(name, timeout) -> bool     # registered and first device list received
    wait_for(predicate, timeout) -> bool         # predicate re-checked on every state change

`active_pods` (given to the constructor or to `start`) returns the agent's active pods as `PodInfo`s; with it
PodResources List/Get cover every active pod, as the kubelet's do (a pod without devices is listed with its
containers).
`on_register` receives a `RegistrationEvent` for every Register call, accepted or not (used by
`kubenode conformance`). Calls the kubelet makes without a deadline (options, Allocate, preferred allocation)
get `rpc_timeout` here so one hung plugin cannot stall the agent forever.
"""

from typing import TYPE_CHECKING, Any

from agent.cm.devicemanager.records import (
    AllocationError,
    ContainerAllocation,
    Device,
    DeviceManagerError,
    PodInfo,
    PodRef,
    PreStartError,
    RegistrationEvent,
    ResourceStatus,
)

if TYPE_CHECKING:
    from agent.cm.devicemanager.listing import describe_resources
    from agent.cm.devicemanager.manager import DeviceManager
    from agent.cm.devicemanager.state import DeviceEvent

# The names whose modules load grpc and protobuf (~28 MiB): imported on first use, so an agent without
# device plugins (--device-plugin-dir none) never loads them; the records above are plain dataclasses.
_LAZY = {
    "describe_resources": "agent.cm.devicemanager.listing",
    "DeviceEvent": "agent.cm.devicemanager.state",
    "DeviceManager": "agent.cm.devicemanager.manager",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AllocationError",
    "ContainerAllocation",
    "Device",
    "DeviceEvent",
    "DeviceManager",
    "DeviceManagerError",
    "PodInfo",
    "PodRef",
    "PreStartError",
    "RegistrationEvent",
    "ResourceStatus",
    "describe_resources",
]
