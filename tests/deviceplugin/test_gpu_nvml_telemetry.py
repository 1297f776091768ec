"""PynvmlNvml's telemetry against a stand-in for the pynvml module (no GPU here): units and the
per-process join of memory and utilization, the calls nvidia-ml-py names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml

from deviceplugin.backends.nvml import GpuAttributes, GpuSample, ProcessSample, PynvmlNvml

MIB = 1024 * 1024


class NotSupported(Exception):
    pass


def fake_pynvml() -> Any:
    def process_utilization(handle: str, since: int) -> list[Any]:
        return [SimpleNamespace(pid=7, smUtil=30), SimpleNamespace(pid=7, smUtil=45)]  # two samples: the max

    def mig_mode(handle: str) -> list[int]:
        raise NotSupported("Not Supported")

    return SimpleNamespace(
        NVMLError=NotSupported,
        NVML_TEMPERATURE_GPU=0,
        nvmlSystemGetDriverVersion=lambda: b"550.54.15",
        nvmlSystemGetCudaDriverVersion=lambda: 12040,
        nvmlDeviceGetHandleByUUID=lambda uuid: uuid,
        nvmlDeviceGetName=lambda h: "NVIDIA H100 80GB HBM3",
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(
            total=81559 * MIB, used=2048 * MIB, free=79511 * MIB
        ),
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
        nvmlDeviceGetMigMode=mig_mode,
        nvmlDeviceGetDisplayActive=lambda h: 0,
        nvmlDeviceGetProcessUtilization=process_utilization,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=7, usedGpuMemory=1536 * MIB),
            SimpleNamespace(pid=8, usedGpuMemory=None),  # NVML gives None where it cannot tell
        ],
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=45, memory=10),
        nvmlDeviceGetTemperature=lambda h, sensor: 41,
        nvmlDeviceGetPowerUsage=lambda h: 123456,  # mW
        nvmlDeviceGetTotalEnergyConsumption=lambda h: 987654321,
    )


def test_attributes_and_sample_in_dcgm_units() -> None:
    nvml = PynvmlNvml()
    nvml._nvml = fake_pynvml()
    assert (nvml.driver_version(), nvml.cuda_driver_version()) == ("550.54.15", 12040)
    h100 = GpuAttributes("GPU-x", "NVIDIA H100 80GB HBM3", 81559, 9, 0, mig_capable=False)
    assert nvml.attributes("GPU-x") == h100
    assert nvml.sample("GPU-x") == GpuSample(
        "GPU-x", 45, 2048, 79511, 41, 123.456, 987654321, (ProcessSample(7, 1536, 45), ProcessSample(8, 0, 0))
    )


def test_the_real_module_has_every_call_used() -> None:
    names = set(vars(fake_pynvml())) - {"NVMLError"}
    assert all(hasattr(pynvml, name) for name in names), sorted(n for n in names if not hasattr(pynvml, n))
