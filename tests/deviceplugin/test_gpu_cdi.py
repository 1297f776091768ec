"""The GPU backend's CDI spec: written at start as nvidia-ctk would, read back by our CDI reader."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from agent.cm.cdidevices import CdiDevices
from agent.container.resources import ContainerResources
from agent.kuberuntime.devfs import dev_plan, node_from_cdi
from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.backends.nvml import GpuInfo
from deviceplugin.gpuconfig import GpuOptions
from harness.fakegpu import DRIVER, LIB_DIR, TelemetryNvml, fake_driver, fake_drm, gpu_info
from kubenode.cdi.registry import load_registry
from tests.devicecgroup.test_devfs import expected_listing, in_namespace

RO = ("ro", "nosuid", "nodev", "rbind", "rprivate")


def started_backend(
    tmp_path: Path, cache: str, driver: Path, dev: Path, gpus: list[GpuInfo] | None = None
) -> GpuBackend:
    nvml = TelemetryNvml(gpus or [gpu_info(0, 0), gpu_info(1, 3)])  # index 1 has minor 3: /dev/nvidia3
    options = GpuOptions(
        cdi=True,
        cdi_spec_dir=str(tmp_path / "cdi"),
        driver_root=str(driver),
        dev_root=str(dev),
        sysfs_root=str(tmp_path / "sys"),  # no DRM nodes unless a test makes them
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


def test_each_gpu_gets_its_drm_nodes_and_by_path_names_a_gpu_without_drm_none(tmp_path: Path) -> None:
    gpus = [gpu_info(0, 0), gpu_info(1, 3), gpu_info(2, 5)]  # bus IDs 00000000:10:00.0, :11:, :12:
    driver, dev, cache = fake_driver(tmp_path, [0, 3, 5], ["nvidiactl"])
    fake_drm(tmp_path / "sys", dev, gpus[0], card=1, render=128)  # card0 is the BMC's display, say
    fake_drm(tmp_path / "sys", dev, gpus[1], card=2, render=129)
    # The third GPU has no drm directory in sysfs (nvidia-drm does not drive it): no DRM nodes, no error.
    # A stale by-path link of another device's node is not taken: it points to no node of this GPU.
    (dev / "dri/by-path/pci-0000:12:00.0-card").symlink_to("../card0")
    backend = started_backend(tmp_path, cache, driver, dev, gpus)
    try:
        registry = load_registry([tmp_path / "cdi"])
        assert registry.errors == []

        def nodes(name: str) -> list[tuple[str, str]]:
            edits = load_registry([tmp_path / "cdi"]).resolve([f"nvidia.com/gpu={name}"])
            return [(n.path, n.host_path) for n in edits.device_nodes if n.path != "/dev/nvidiactl"]

        dri = dev / "dri"
        assert nodes(gpus[1].uuid) == [
            ("/dev/nvidia3", str(dev / "nvidia3")),
            ("/dev/dri/card2", str(dri / "card2")),  # the host's numbers, in the container too
            ("/dev/dri/renderD129", str(dri / "renderD129")),
            ("/dev/dri/by-path/pci-0000:11:00.0-card", str(dri / "card2")),  # udev's names, same nodes
            ("/dev/dri/by-path/pci-0000:11:00.0-render", str(dri / "renderD129")),
        ]
        assert nodes("0") == [
            ("/dev/nvidia0", str(dev / "nvidia0")),
            ("/dev/dri/card1", str(dri / "card1")),
            ("/dev/dri/renderD128", str(dri / "renderD128")),
            ("/dev/dri/by-path/pci-0000:10:00.0-card", str(dri / "card1")),
            ("/dev/dri/by-path/pci-0000:10:00.0-render", str(dri / "renderD128")),
        ]
        assert nodes(gpus[2].uuid) == [("/dev/nvidia5", str(dev / "nvidia5"))]
        every = [path for path, _ in nodes("all")]
        assert [p for p in every if p.startswith("/dev/dri/") and "by-path" not in p] == [
            "/dev/dri/card1", "/dev/dri/renderD128", "/dev/dri/card2", "/dev/dri/renderD129"
        ]  # fmt: skip
        assert len(every) == 3 + 8
    finally:
        backend.stop()


def test_a_drm_node_missing_from_dev_is_left_out(tmp_path: Path) -> None:
    gpu = gpu_info(0, 0)
    driver, dev, cache = fake_driver(tmp_path, [0], ["nvidiactl"])
    fake_drm(tmp_path / "sys", dev, gpu, card=1, render=128)
    (dev / "dri/renderD128").unlink()  # sysfs names it, the host's /dev lacks it: a runtime would fail on it
    backend = started_backend(tmp_path, cache, driver, dev, [gpu])
    try:
        edits = load_registry([tmp_path / "cdi"]).resolve([f"nvidia.com/gpu={gpu.uuid}"])
    finally:
        backend.stop()
    assert [n.path for n in edits.device_nodes if "dri" in n.path] == [
        "/dev/dri/card1",
        "/dev/dri/by-path/pci-0000:10:00.0-card",
    ]


def test_the_agent_builds_a_containers_dev_from_the_gpu_spec(tmp_path: Path) -> None:
    """The process runtime's /dev (agent/kuberuntime/devfs.py) from the spec the agent resolves: the GPU's
    nodes and its by-path names as nodes, in the container's own mount namespace."""
    if os.geteuid() != 0:
        pytest.fail("this test needs root (mknod, mount namespaces)")
    gpu = gpu_info(1, 3)
    driver, dev, cache = fake_driver(tmp_path, [3], ["nvidiactl"])
    fake_drm(tmp_path / "sys", dev, gpu, card=2, render=129)
    numbers = {
        "nvidia3": (195, 3), "nvidiactl": (195, 255), "dri/card2": (226, 2), "dri/renderD129": (226, 129)
    }  # fmt: skip
    for name, (major, minor) in numbers.items():  # real character devices, as the host's are
        (dev / name).unlink()
        os.mknod(dev / name, stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(dev / name, 0o666)  # past the umask
    backend = started_backend(tmp_path, cache, driver, dev, [gpu])
    try:
        resources = CdiDevices([tmp_path / "cdi"]).apply(
            ContainerResources(cdi_devices=[f"nvidia.com/gpu={gpu.uuid}"])
        )
    finally:
        backend.stop()
    assert resources.cdi_edits is not None
    plan = dev_plan([node_from_cdi(node) for node in resources.cdi_edits.device_nodes])
    report = in_namespace(plan)
    assert "error" not in report, report
    by_path = "dri/by-path/pci-0000:11:00.0"
    assert report["listing"] == expected_listing(
        ("nvidiactl", "c 195:255 0666 0:0"), ("nvidia3", "c 195:3 0666 0:0"),
        ("dri", "dir 0755"), ("dri/card2", "c 226:2 0666 0:0"), ("dri/renderD129", "c 226:129 0666 0:0"),
        ("dri/by-path", "dir 0755"), (f"{by_path}-card", "c 226:2 0666 0:0"),
        (f"{by_path}-render", "c 226:129 0666 0:0"),
    )  # fmt: skip
