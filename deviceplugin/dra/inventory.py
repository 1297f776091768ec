"""The devices each driver publishes, as ResourceSlice device entries, and the CDI edits each one needs.

`cpu.kubenode.io`: one device per online logical CPU, `cpu-<n>`, with the attributes `numaNode`,
`socket`, `core` (the lowest thread of its physical core) and `smtSibling` (the other thread of that
core, or the CPU itself without SMT). Its edits pin the container: `KUBENODE_CPUSET` and the createRuntime
cpuset hook (deviceplugin/cdi.py's entry), which under kubenode's agent is applied as the pod's cpuset.
`gpu.kubenode.io`: one device per GPU (`gpu-<index>`), from NVML or from static entries in the config,
with `uuid`, `productName`, `architecture`, `cudaComputeCapability` and `driverVersion` (versions),
`pciBusID`, `numaNode` and the capacity `memory`; its edits are the GPU's device nodes and
`NVIDIA_VISIBLE_DEVICES`, as the GPU backend's Allocate gives them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deviceplugin.backends.cputopology import read_cpu_topology
from deviceplugin.backends.gpu import CONTROL_DEVICES, VISIBLE_DEVICES_ENV
from deviceplugin.cdi import device_entry
from deviceplugin.hookcommand import HookCommand
from kubenode.devicecontract import DRA_CPU_DRIVER

CPU_DRIVER = DRA_CPU_DRIVER
GPU_DRIVER = "gpu.kubenode.io"
DRIVERS = (CPU_DRIVER, GPU_DRIVER)


@dataclass(frozen=True)
class DraDevice:
    name: str
    attributes: Mapping[str, Mapping[str, Any]]  # kube's typed values: {"int": 0}, {"version": "8.0.0"}
    capacity: Mapping[str, str] = field(default_factory=dict)
    edits: Mapping[str, Any] = field(default_factory=dict)  # CDI containerEdits
    healthy: bool = True
    # Host paths of the edits' deviceNodes that a claim's spec names only where they exist when it is
    # prepared (the GPU's control devices: /dev/nvidia-uvm appears once the uvm module loads).
    optional_device_nodes: tuple[str, ...] = ()

    def slice_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.name,
            "attributes": {k: dict(v) for k, v in self.attributes.items()},
        }
        if self.capacity:
            entry["capacity"] = {k: {"value": v} for k, v in self.capacity.items()}
        return entry


@dataclass(frozen=True)
class GpuDescription:
    """One GPU as the driver publishes it (from NVML, or a static entry in the config)."""

    index: int
    uuid: str
    product_name: str = ""
    architecture: str = ""
    cuda_compute_capability: str = ""  # "8.0"
    driver_version: str = ""  # "550.54.15"
    pci_bus_id: str = ""
    numa_node: int = -1
    memory: str = ""  # a quantity, "40Gi"
    minor: int = -1  # N in /dev/nvidiaN; -1: same as the index


def cpu_devices(hook: HookCommand, sysfs_root: str | Path = "/sys") -> list[DraDevice]:
    devices = []
    for cpu in read_cpu_topology(sysfs_root):
        others = sorted(cpu.siblings - {cpu.cpu})
        attributes = {
            "numaNode": {"int": cpu.numa_node if cpu.numa_node is not None else 0},
            "socket": {"int": _socket_of(sysfs_root, cpu.cpu)},
            "core": {"int": cpu.core},
            "smtSibling": {"int": others[0] if others else cpu.cpu},
        }
        edits = device_entry(frozenset({cpu.cpu}), hook)["containerEdits"]
        devices.append(DraDevice(f"cpu-{cpu.cpu}", attributes, edits=edits))
    return devices


def _socket_of(sysfs_root: str | Path, cpu: int) -> int:
    path = Path(sysfs_root, f"devices/system/cpu/cpu{cpu}/topology/physical_package_id")
    try:
        return max(0, int(path.read_text().strip()))
    except (OSError, ValueError):
        return 0


def gpu_devices(gpus: list[GpuDescription], dev_root: str = "/dev") -> list[DraDevice]:
    devices = []
    for gpu in gpus:
        attributes: dict[str, dict[str, Any]] = {"uuid": {"string": gpu.uuid}}
        for name, value in (
            ("productName", gpu.product_name),
            ("architecture", gpu.architecture),
            ("pciBusID", gpu.pci_bus_id),
        ):
            if value:
                attributes[name] = {"string": value}
        for name, value in (
            ("cudaComputeCapability", gpu.cuda_compute_capability),
            ("driverVersion", gpu.driver_version),
        ):
            if value:
                attributes[name] = {"version": semver(value)}
        attributes["numaNode"] = {"int": gpu.numa_node}
        minor = gpu.minor if gpu.minor >= 0 else gpu.index
        nodes = [f"nvidia{minor}", *CONTROL_DEVICES]
        edits = {
            "env": [f"{VISIBLE_DEVICES_ENV}={gpu.uuid}"],
            "deviceNodes": [{"path": f"/dev/{n}", "hostPath": str(Path(dev_root, n))} for n in nodes],
        }
        capacity = {"memory": gpu.memory} if gpu.memory else {}
        optional = tuple(str(Path(dev_root, n)) for n in CONTROL_DEVICES)
        devices.append(
            DraDevice(f"gpu-{gpu.index}", attributes, capacity, edits, optional_device_nodes=optional)
        )
    return devices


def semver(text: str) -> str:
    """A version attribute is semver: "8.0" -> "8.0.0", "550.54.15" stays; leading zeros are dropped."""
    parts = [str(int(p)) for p in re.findall(r"\d+", text)[:3]]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def static_gpus(entries: Sequence[Mapping[str, Any]], where: str) -> list[GpuDescription]:
    """The config's `gpus:` list; a bad entry raises ValueError naming it."""
    gpus = []
    for i, entry in enumerate(entries):
        try:
            gpus.append(
                GpuDescription(
                    index=int(entry.get("index", i)),
                    uuid=str(entry["uuid"]),
                    product_name=str(entry.get("productName", "")),
                    architecture=str(entry.get("architecture", "")),
                    cuda_compute_capability=str(entry.get("cudaComputeCapability", "")),
                    driver_version=str(entry.get("driverVersion", "")),
                    pci_bus_id=str(entry.get("pciBusID", "")),
                    numa_node=int(entry.get("numaNode", -1)),
                    memory=str(entry.get("memory", "")),
                    minor=int(entry.get("minor", -1)),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{where}: gpus[{i}]: {exc!r}") from None
    return gpus


def nvml_gpus() -> list[GpuDescription]:
    """Every GPU NVML sees, described; [] where NVML is absent."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver: a node without GPUs
        return []
    try:
        nv: Any = pynvml
        driver = _text(nv.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            major, minor_cc = nv.nvmlDeviceGetCudaComputeCapability(handle)
            pci = _text(nv.nvmlDeviceGetPciInfo(handle).busId)
            gpus.append(
                GpuDescription(
                    index=index,
                    uuid=_text(nv.nvmlDeviceGetUUID(handle)),
                    product_name=_text(nv.nvmlDeviceGetName(handle)),
                    architecture=_architecture(nv, handle),
                    cuda_compute_capability=f"{major}.{minor_cc}",
                    driver_version=driver,
                    pci_bus_id=pci,
                    numa_node=_numa_of_pci(pci),
                    memory=f"{nv.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)}Mi",
                    minor=int(nv.nvmlDeviceGetMinorNumber(handle)),
                )
            )
        return gpus
    finally:
        pynvml.nvmlShutdown()


_ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada",
    9: "Hopper",
    10: "Blackwell",
}


def _architecture(nv: Any, handle: Any) -> str:
    try:
        return _ARCHITECTURES.get(int(nv.nvmlDeviceGetArchitecture(handle)), "")
    except Exception:  # older drivers lack the call
        return ""


def _numa_of_pci(bus_id: str) -> int:
    # NVML's 8-digit domain -> sysfs's 4-digit one
    path = Path("/sys/bus/pci/devices", bus_id.lower()[-12:], "numa_node")
    try:
        return max(-1, int(path.read_text().strip()))
    except (OSError, ValueError):
        return -1


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
