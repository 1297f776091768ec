"""Value types the device manager hands out: pods, devices, resources, allocations, registration events."""

from __future__ import annotations

from dataclasses import dataclass

from kubenode.deviceapi import HEALTHY, UNHEALTHY


class DeviceManagerError(Exception):
    """Base class of the device manager's errors."""


class AllocationError(DeviceManagerError):
    """An allocation could not be made; the message names the resource and the counts."""


class PreStartError(DeviceManagerError):
    """PreStartContainer failed or timed out for a container's devices."""


@dataclass(frozen=True)
class PodRef:
    uid: str
    namespace: str
    name: str


@dataclass(frozen=True)
class PodInfo:
    """An active pod as PodResources lists it; containers in the kubelet's order (sidecars, then the rest)."""

    uid: str
    namespace: str
    name: str
    containers: tuple[str, ...]


@dataclass(frozen=True)
class Device:
    """One device as last advertised by its plugin."""

    id: str
    healthy: bool
    numa_nodes: frozenset[int] = frozenset()

    @property
    def health(self) -> str:
        return HEALTHY if self.healthy else UNHEALTHY


@dataclass(frozen=True)
class ResourceStatus:
    """A resource for status and `kubenode up`: devices, whether its plugin is connected, its options."""

    name: str
    devices: tuple[Device, ...]
    connected: bool
    endpoint: str | None
    pre_start_required: bool
    get_preferred_allocation_available: bool
    allocated: int

    @property
    def capacity(self) -> int:
        return len(self.devices)

    @property
    def allocatable(self) -> int:
        return sum(1 for d in self.devices if d.healthy)


@dataclass(frozen=True)
class ContainerAllocation:
    """The devices one container holds, per resource, with the NUMA nodes each device reported."""

    pod: PodRef
    container: str
    devices: dict[str, tuple[str, ...]]
    numa: dict[str, dict[str, tuple[int, ...]]]
    cpu_ids: tuple[int, ...]


@dataclass(frozen=True)
class RegistrationEvent:
    """One Register call as the device manager saw it (for `kubenode conformance` and logs)."""

    resource_name: str
    version: str
    endpoint: str
    request_pre_start_required: bool
    request_preferred_allocation: bool
    serving_at_register: bool
    plugin_pre_start_required: bool | None
    plugin_preferred_allocation: bool | None
    accepted: bool
    error: str | None
    at: float
