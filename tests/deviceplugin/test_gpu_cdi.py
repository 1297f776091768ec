"""The GPU backend's CDI spec: written at start as nvidia-ctk would, read back by our CDI reader."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.gpuconfig import GpuOptions
from harness.fakegpu import DRIVER, LIB_DIR, TelemetryNvml, fake_driver, gpu_info
from kubenode.cdi.registry import load_registry

RO = ("ro", "nosuid", "nodev", "rbind", "rprivate")


def started_backend(tmp_path: Path, cache: str, driver: Path, dev: Path) -> GpuBackend:
    nvml = TelemetryNvml([gpu_info(0, 0), gpu_info(1, 3)])  # index 1 has minor 3: /dev/nvidia3
    options = GpuOptions(
        cdi=True, cdi_spec_dir=str(tmp_path / "cdi"), driver_root=str(driver), dev_root=str(dev)
    )
    backend = GpuBackend("nvidia.com/gpu", options, nvml=nvml, telemetry=nvml, loader_cache=lambda: cache)
    backend.start(lambda: None)
    return backend


def test_spec_for_two_gpus_resolves_to_nodes_libraries_and_smi(tmp_path: Path) -> None:
    driver, dev, cache = fake_driver(tmp_path, [0, 3], ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"])
    backend = started_backend(tmp_path, cache, driver, dev)
    try:
        uuid = gpu_info(1, 3).uuid
        assert backend.allocate([uuid]).cdi_devices == [f"nvidia.com/gpu={uuid}"]
        registry = load_registry([tmp_path / "cdi"])
        assert registry.errors == []
        edits = registry.resolve([f"nvidia.com/gpu={uuid}"])
    finally:
        backend.stop()
    nodes = [(n.path, n.host_path) for n in edits.device_nodes]
    assert nodes == [
        ("/dev/nvidiactl", str(dev / "nvidiactl")),
        ("/dev/nvidia-uvm", str(dev / "nvidia-uvm")),
        ("/dev/nvidia-uvm-tools", str(dev / "nvidia-uvm-tools")),  # nvidia-modeset is absent: not named
        ("/dev/nvidia3", str(dev / "nvidia3")),  # the minor, not the index
    ]
    lib = driver / LIB_DIR.lstrip("/")
    assert [(m.host_path, m.container_path, m.options) for m in edits.mounts] == [
        (str(lib / f"libcuda.so.{DRIVER}"), f"{LIB_DIR}/libcuda.so.{DRIVER}", RO),
        (str(lib / f"libcuda.so.{DRIVER}"), f"{LIB_DIR}/libcuda.so.1", RO),
        (str(lib / f"libnvidia-ml.so.{DRIVER}"), f"{LIB_DIR}/libnvidia-ml.so.{DRIVER}", RO),
        (str(lib / f"libnvidia-ml.so.{DRIVER}"), f"{LIB_DIR}/libnvidia-ml.so.1", RO),
        (str(driver / "usr/bin/nvidia-smi"), "/usr/bin/nvidia-smi", RO),
    ]  # neither the old driver's libcuda.so.535.104.05 nor libz
    assert f"LD_LIBRARY_PATH={LIB_DIR}" in edits.env
    every = load_registry([tmp_path / "cdi"]).resolve(["nvidia.com/gpu=all"])
    assert [n.path for n in every.device_nodes][-2:] == ["/dev/nvidia0", "/dev/nvidia3"]
    by_index = load_registry([tmp_path / "cdi"]).resolve(["nvidia.com/gpu=1"])
    assert by_index.device_nodes[-1].path == "/dev/nvidia3"
    spec = json.loads((tmp_path / "cdi/kubenode-gpu_nvidia.com_gpu.json").read_text())
    assert spec["kind"] == "nvidia.com/gpu"
    assert oct((tmp_path / "cdi/kubenode-gpu_nvidia.com_gpu.json").stat().st_mode & 0o777) == "0o644"


def test_no_driver_in_the_loader_cache_is_one_line_and_gpus_still_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    driver, dev, _ = fake_driver(tmp_path, [0, 3], ["nvidiactl"])
    caplog.set_level(logging.INFO, logger="deviceplugin")
    backend = started_backend(tmp_path, "0 libs found in cache `/etc/ld.so.cache'\n", driver, dev)
    try:
        assert len(backend.devices()) == 2
    finally:
        backend.stop()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "nvidia.com/gpu: CDI spec not written" in errors[0]
    assert "libcuda.so.1" in errors[0]
    assert not (tmp_path / "cdi").exists() or not list((tmp_path / "cdi").iterdir())
