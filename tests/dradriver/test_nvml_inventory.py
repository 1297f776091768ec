"""The GPU driver's NVML reading (deviceplugin/dra/inventory.py `nvml_gpus`) against a stand-in pynvml with
the calls and return types of the real one (the test machine has no GPU): what each attribute becomes,
and that NVML is shut down after."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from deviceplugin.dra.inventory import gpu_devices, nvml_gpus


def fake_pynvml(calls: list[str]) -> Any:
    handle = object()
    return SimpleNamespace(
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlSystemGetDriverVersion=lambda: b"550.54.15",
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: handle,
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=b"00000000:19:00.0"),
        nvmlDeviceGetUUID=lambda h: "GPU-1234",
        nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetArchitecture=lambda h: 9,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(total=80 * 1024**3),
        nvmlDeviceGetMinorNumber=lambda h: 3,
    )


def test_nvml_gpus_become_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(calls))
    [gpu] = nvml_gpus()
    assert calls == ["init", "shutdown"]
    [device] = gpu_devices([gpu])
    entry = device.slice_entry()
    assert entry["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert entry["attributes"]["architecture"] == {"string": "Hopper"}
    assert entry["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert entry["attributes"]["driverVersion"] == {"version": "550.54.15"}
    assert entry["attributes"]["pciBusID"] == {"string": "00000000:19:00.0"}
    assert entry["capacity"] == {"memory": {"value": "81920Mi"}}
    assert device.edits["deviceNodes"][0]["path"] == "/dev/nvidia3"
