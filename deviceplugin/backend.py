"""What every device backend provides, and the types that cross the backend boundary.

A backend discovers devices, reports their health, turns a set of device IDs
into what a container needs (env, device nodes, mounts, annotations, CDI names)
and may prefer some devices over others. Input checks (unknown, unhealthy or
duplicate IDs) happen once, above the backends, in `deviceplugin.devicestate`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from deviceplugin.config import DeviceNode, MountSpec
from deviceplugin.packing import pack


@dataclass(frozen=True)
class Device:
    id: str
    healthy: bool = True
    numa_nodes: tuple[int, ...] = ()  # empty: no topology


@dataclass
class ContainerAllocation:
    envs: dict[str, str] = field(default_factory=dict)
    device_nodes: list[DeviceNode] = field(default_factory=list)
    mounts: list[MountSpec] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: list[str] = field(default_factory=list)

    def merge(self, other: ContainerAllocation) -> None:
        """Add another device's needs; the first value of a key wins, as in the kubelet."""
        for key, value in other.envs.items():
            self.envs.setdefault(key, value)
        for key, value in other.annotations.items():
            self.annotations.setdefault(key, value)
        self.device_nodes += [n for n in other.device_nodes if n not in self.device_nodes]
        self.mounts += [m for m in other.mounts if m not in self.mounts]
        self.cdi_devices += [c for c in other.cdi_devices if c not in self.cdi_devices]


class BackendError(RuntimeError):
    """The backend cannot start (e.g. NVML missing with failOnInitError)."""


OnChange = Callable[[], object]


class Backend(ABC):
    """One resource's devices. `start` may begin health watching; call `on_change` when devices() changes."""

    # Whether allocate() may block (writes and fsyncs files): then the gRPC server answers Allocate on its
    # bounded executor; otherwise on its event loop, which saves two thread hand-offs per call.
    allocate_blocks: bool = True

    def start(self, on_change: OnChange) -> None:  # noqa: B027  # optional hook, default: static health
        """Begin watching health; the default backend never changes."""

    def stop(self) -> None:  # noqa: B027  # optional hook
        """Stop watching; must release every thread, fd and handle."""

    @abstractmethod
    def devices(self) -> list[Device]:
        """The current devices with health and topology."""

    @abstractmethod
    def allocate(self, ids: Sequence[str]) -> ContainerAllocation:
        """What a container given these (known, healthy, distinct) devices needs."""

    def preferred(self, available: Sequence[Device], must_include: Sequence[str], size: int) -> list[str]:
        """Which of `available` to use: must-include first, then packed into as few NUMA nodes as possible."""
        return pack(available, must_include, size)
