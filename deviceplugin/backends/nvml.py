"""The little of NVML the GPU backend needs, behind interfaces so tests can inject a fake.

`Nvml` is discovery and health; `NvmlTelemetry` adds what labels, the CDI spec and metrics need
(device attributes, the driver version, samples with per-process memory and utilization).
`PynvmlNvml` is the real one for both (nvidia-ml-py, module pynvml); it raises
`NvmlUnavailable` from `init()` where the library or driver is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this machine (no library, no driver, no permission)."""


@dataclass(frozen=True)
class GpuInfo:
    index: int
    uuid: str
    minor: int  # N in /dev/nvidiaN
    pci_bus_id: str  # as NVML reports it, e.g. 00000000:3B:00.0

    @property
    def pci_address(self) -> str:
        """The bus ID as sysfs and udev name the device: a 4-digit domain, lower case (0000:3b:00.0)."""
        domain, _, rest = self.pci_bus_id.lower().partition(":")
        return f"{int(domain, 16):04x}:{rest}" if rest else self.pci_bus_id.lower()


@dataclass(frozen=True)
class XidEvent:
    uuid: str
    xid: int


@dataclass(frozen=True)
class GpuAttributes:
    """What GPU Feature Discovery labels and dcgm-exporter's labels are made of."""

    uuid: str
    name: str  # product name as NVML gives it, e.g. "NVIDIA H100 80GB HBM3"
    memory_mib: int
    compute_major: int
    compute_minor: int
    mig_capable: bool = False
    display_active: bool = False


@dataclass(frozen=True)
class ProcessSample:
    pid: int
    used_mib: int  # framebuffer the process holds
    sm_util: int  # percent of the GPU's SMs over the last sample period


@dataclass(frozen=True)
class GpuSample:
    uuid: str
    gpu_util: int  # percent
    fb_used_mib: int
    fb_free_mib: int
    temperature_c: int
    power_w: float
    energy_mj: int  # total since the driver loaded, millijoules
    processes: tuple[ProcessSample, ...] = ()


class NvmlTelemetry(Protocol):
    def driver_version(self) -> str:
        """The kernel driver's version, e.g. 550.54.15."""
        ...

    def cuda_driver_version(self) -> int:
        """The CUDA version the driver supports, as NVML encodes it (12040 is 12.4)."""
        ...

    def attributes(self, uuid: str) -> GpuAttributes: ...
    def sample(self, uuid: str) -> GpuSample: ...


class Nvml(Protocol):
    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def gpus(self) -> list[GpuInfo]: ...
    def wait_xid(self, timeout_s: float) -> XidEvent | None:
        """Block up to timeout_s for the next critical-Xid event."""
        ...

    def probe(self, uuid: str) -> bool:
        """A cheap health probe: can the GPU still be queried?"""
        ...


class PynvmlNvml:
    def __init__(self) -> None:
        self._nvml: Any = None
        self._event_set: Any = None

    def init(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # pynvml raises NVMLError subclasses, or OSError while loading
            raise NvmlUnavailable(str(exc) or type(exc).__name__) from None
        self._nvml = pynvml

    def shutdown(self) -> None:
        if self._nvml is None:
            return
        if self._event_set is not None:
            self._nvml.nvmlEventSetFree(self._event_set)
            self._event_set = None
        self._nvml.nvmlShutdown()
        self._nvml = None

    def gpus(self) -> list[GpuInfo]:
        nv = self._nvml
        result = []
        index = None
        try:
            for index in range(nv.nvmlDeviceGetCount()):
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                result.append(
                    GpuInfo(
                        index=index,
                        uuid=_text(nv.nvmlDeviceGetUUID(handle)),
                        minor=int(nv.nvmlDeviceGetMinorNumber(handle)),
                        pci_bus_id=_text(nv.nvmlDeviceGetPciInfo(handle).busId),
                    )
                )
        except nv.NVMLError as exc:  # e.g. GPU_IS_LOST: NVML loaded but the GPUs cannot be listed
            where = "counting GPUs" if index is None else f"reading GPU {index}"
            raise NvmlUnavailable(f"{where}: {exc}") from None
        return result

    def _events(self) -> Any:
        nv = self._nvml
        if self._event_set is None:
            self._event_set = nv.nvmlEventSetCreate()
            for index in range(nv.nvmlDeviceGetCount()):
                try:
                    handle = nv.nvmlDeviceGetHandleByIndex(index)
                    nv.nvmlDeviceRegisterEvents(handle, nv.nvmlEventTypeXidCriticalError, self._event_set)
                except nv.NVMLError:
                    pass  # e.g. NOT_SUPPORTED on some boards: such a GPU is only probed
        return self._event_set

    def wait_xid(self, timeout_s: float) -> XidEvent | None:
        nv = self._nvml
        try:
            data = nv.nvmlEventSetWait_v2(self._events(), int(timeout_s * 1000))
        except nv.NVMLError_Timeout:
            return None
        if data.eventType != nv.nvmlEventTypeXidCriticalError:
            return None
        return XidEvent(_text(nv.nvmlDeviceGetUUID(data.device)), int(data.eventData))

    def probe(self, uuid: str) -> bool:
        nv = self._nvml
        try:
            handle = nv.nvmlDeviceGetHandleByUUID(uuid)
            nv.nvmlDeviceGetMemoryInfo(handle)
        except nv.NVMLError:
            return False
        return True

    def driver_version(self) -> str:
        return _text(self._nvml.nvmlSystemGetDriverVersion())

    def cuda_driver_version(self) -> int:
        return int(self._nvml.nvmlSystemGetCudaDriverVersion())

    def attributes(self, uuid: str) -> GpuAttributes:
        nv = self._nvml
        handle = nv.nvmlDeviceGetHandleByUUID(uuid)
        major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
        try:
            current, _ = nv.nvmlDeviceGetMigMode(handle)
            mig_capable = current is not None
        except nv.NVMLError:  # NOT_SUPPORTED: a board without MIG
            mig_capable = False
        try:
            display = bool(nv.nvmlDeviceGetDisplayActive(handle))
        except nv.NVMLError:
            display = False
        return GpuAttributes(
            uuid=uuid,
            name=_text(nv.nvmlDeviceGetName(handle)),
            memory_mib=int(nv.nvmlDeviceGetMemoryInfo(handle).total) // MIB,
            compute_major=int(major),
            compute_minor=int(minor),
            mig_capable=mig_capable,
            display_active=display,
        )

    def sample(self, uuid: str) -> GpuSample:
        nv = self._nvml
        handle = nv.nvmlDeviceGetHandleByUUID(uuid)
        memory = nv.nvmlDeviceGetMemoryInfo(handle)
        sm_util: dict[int, int] = {}
        try:  # samples newer than about one second ago; NOT_FOUND when no process ran
            for s in nv.nvmlDeviceGetProcessUtilization(handle, 0):
                sm_util[int(s.pid)] = max(sm_util.get(int(s.pid), 0), int(s.smUtil))
        except nv.NVMLError:
            pass
        processes = tuple(
            ProcessSample(int(p.pid), int(p.usedGpuMemory or 0) // MIB, sm_util.get(int(p.pid), 0))
            for p in nv.nvmlDeviceGetComputeRunningProcesses(handle)
        )
        return GpuSample(
            uuid=uuid,
            gpu_util=int(nv.nvmlDeviceGetUtilizationRates(handle).gpu),
            fb_used_mib=int(memory.used) // MIB,
            fb_free_mib=int(memory.free) // MIB,
            temperature_c=int(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)),
            power_w=nv.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            energy_mj=int(nv.nvmlDeviceGetTotalEnergyConsumption(handle)),
            processes=processes,
        )


MIB = 1024 * 1024


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
