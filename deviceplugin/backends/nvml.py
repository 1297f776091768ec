"""The little of NVML the GPU backend needs, behind an interface so tests can inject a fake.

`PynvmlNvml` is the real one (nvidia-ml-py, module pynvml); it raises
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


@dataclass(frozen=True)
class XidEvent:
    uuid: str
    xid: int


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


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
