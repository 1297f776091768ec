"""The gpu backend: health rules with explicit times, the monitor on a fake NVML, and NVML really absent."""

from __future__ import annotations

import logging
import queue
import re
import threading
from pathlib import Path

import pytest

from deviceplugin.backend import BackendError
from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.backends.gpuhealth import GpuHealth
from deviceplugin.backends.nvml import GpuInfo, NvmlUnavailable, PynvmlNvml, XidEvent
from deviceplugin.gpuconfig import DEFAULT_IGNORED_XIDS, GpuOptions
from tests.deviceplugin.support import wait_until

UUIDS = ("GPU-aaaa", "GPU-bbbb")


class FakeNvml:
    """Two GPUs; Xid events are queued by the test, probes answer what the test says."""

    def __init__(self, unavailable: bool = False) -> None:
        self.unavailable = unavailable
        self.events: queue.Queue[XidEvent] = queue.Queue()
        self.probe_ok = dict.fromkeys(UUIDS, True)
        self.shut_down = threading.Event()

    def init(self) -> None:
        if self.unavailable:
            raise NvmlUnavailable("Driver Not Loaded")

    def shutdown(self) -> None:
        self.shut_down.set()

    def gpus(self) -> list[GpuInfo]:
        return [GpuInfo(0, UUIDS[0], 0, "00000000:3B:00.0"), GpuInfo(1, UUIDS[1], 1, "00000000:AF:00.0")]

    def wait_xid(self, timeout_s: float) -> XidEvent | None:
        try:
            return self.events.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def probe(self, uuid: str) -> bool:
        return self.probe_ok[uuid]


@pytest.fixture
def fake_host(tmp_path: Path) -> tuple[Path, Path]:
    sysfs, dev = tmp_path / "sys", tmp_path / "dev"
    for address, node in (("0000:3b:00.0", "0"), ("0000:af:00.0", "-1")):
        (sysfs / "bus/pci/devices" / address).mkdir(parents=True)
        (sysfs / "bus/pci/devices" / address / "numa_node").write_text(node + "\n")
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    return sysfs, dev


def test_health_rules_with_explicit_times() -> None:
    health = GpuHealth(UUIDS, DEFAULT_IGNORED_XIDS, recovery_seconds=30)
    assert not health.on_xid(UUIDS[0], 13)  # ignored: an application error
    assert health.healthy(UUIDS[0])
    assert health.on_xid(UUIDS[0], 79)  # fell off the bus: critical
    assert not health.on_xid(UUIDS[0], 79)  # already unhealthy
    assert not health.on_probe(UUIDS[0], True, now=100)
    assert not health.on_probe(UUIDS[0], True, now=120)
    assert not health.on_probe(UUIDS[0], False, now=125)  # a failing probe restarts the clock
    assert not health.on_probe(UUIDS[0], True, now=126)
    assert not health.on_probe(UUIDS[0], True, now=150)
    assert health.on_probe(UUIDS[0], True, now=156)
    assert health.healthy(UUIDS[0]) and health.unhealthy() == []
    assert not health.on_xid("GPU-unknown", 79)


def test_devices_allocation_and_topology(fake_host: tuple[Path, Path]) -> None:
    sysfs, dev = fake_host
    options = GpuOptions(cdi=True, sysfs_root=str(sysfs), dev_root=str(dev))
    backend = GpuBackend("nvidia.com/gpu", options, nvml=FakeNvml())
    assert [(d.id, d.healthy, d.numa_nodes) for d in backend.devices()] == [
        (UUIDS[0], True, (0,)),
        (UUIDS[1], True, ()),  # numa_node -1: no topology
    ]
    allocation = backend.allocate([UUIDS[1]])
    assert allocation.envs == {"NVIDIA_VISIBLE_DEVICES": UUIDS[1], "CUDA_VISIBLE_DEVICES": UUIDS[1]}
    assert [(n.host_path, n.container_path) for n in allocation.device_nodes] == [
        (str(dev / "nvidia1"), "/dev/nvidia1"),
        (str(dev / "nvidiactl"), "/dev/nvidiactl"),
        (str(dev / "nvidia-uvm"), "/dev/nvidia-uvm"),  # nvidia-uvm-tools is absent, so not passed
    ]
    assert allocation.cdi_devices == [f"nvidia.com/gpu={UUIDS[1]}"]
    by_index = GpuBackend(
        "nvidia.com/gpu", GpuOptions(id_strategy="index", sysfs_root=str(sysfs)), nvml=FakeNvml()
    )
    assert [d.id for d in by_index.devices()] == ["0", "1"]
    # NVIDIA's variable names the plugin's IDs; CUDA's always the UUIDs, which CUDA matches in any order.
    assert by_index.allocate(["1", "0"]).envs == {
        "NVIDIA_VISIBLE_DEVICES": "1,0",
        "CUDA_VISIBLE_DEVICES": f"{UUIDS[1]},{UUIDS[0]}",
    }


def test_xid_makes_unhealthy_and_probes_recover(fake_host: tuple[Path, Path]) -> None:
    sysfs, _ = fake_host
    nvml = FakeNvml()
    options = GpuOptions(sysfs_root=str(sysfs), recovery_seconds=0.2, probe_interval_seconds=0.02)
    backend = GpuBackend("nvidia.com/gpu", options, nvml=nvml)
    changes: list[dict[str, bool]] = []
    changed = threading.Event()

    def on_change() -> None:
        changes.append({d.id: d.healthy for d in backend.devices()})
        changed.set()

    backend.start(on_change)
    try:
        nvml.events.put(XidEvent(UUIDS[1], 43))  # ignored by default
        nvml.probe_ok[UUIDS[1]] = False
        nvml.events.put(XidEvent(UUIDS[1], 48))  # double-bit ECC: critical
        assert changed.wait(30)
        assert changes == [{UUIDS[0]: True, UUIDS[1]: False}]
        nvml.probe_ok[UUIDS[1]] = True  # the GPU answers again; after 0.2 s of passing probes it is back
        assert wait_until(lambda: len(changes) == 2, 30)
        assert changes[1] == {UUIDS[0]: True, UUIDS[1]: True}
    finally:
        backend.stop()
    assert nvml.shut_down.is_set()


def test_nvml_absent_for_real_is_one_line_and_no_devices(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="deviceplugin")
    backend = GpuBackend("kubenode.io/gpu", GpuOptions())
    assert backend.devices() == []
    backend.start(lambda: None)
    backend.stop()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("deviceplugin")]
    assert len(lines) == 1 and "NVML unavailable" in lines[0] and "kubenode.io/gpu" in lines[0]


def test_nvml_absent_fails_when_configured() -> None:
    with pytest.raises(BackendError, match=r"kubenode\.io/gpu: NVML unavailable"):
        GpuBackend("kubenode.io/gpu", GpuOptions(fail_on_init_error=True))
    with pytest.raises(BackendError, match="Driver Not Loaded"):
        GpuBackend("kubenode.io/gpu", GpuOptions(fail_on_init_error=True), nvml=FakeNvml(unavailable=True))


class LostGpuNvml(FakeNvml):
    """NVML loads, but listing the GPUs fails (what PynvmlNvml.gpus reports for e.g. GPU_IS_LOST)."""

    def gpus(self) -> list[GpuInfo]:
        raise NvmlUnavailable("reading GPU 1: GPU is lost")


def test_gpus_that_cannot_be_listed_release_nvml_and_are_reported() -> None:
    nvml = LostGpuNvml()
    backend = GpuBackend("kubenode.io/gpu", GpuOptions(), nvml=nvml)
    assert backend.devices() == [] and nvml.shut_down.is_set()
    with pytest.raises(
        BackendError, match=re.escape("kubenode.io/gpu: NVML unavailable (reading GPU 1: GPU is lost)")
    ):
        GpuBackend("kubenode.io/gpu", GpuOptions(fail_on_init_error=True), nvml=LostGpuNvml())


def test_pynvml_listing_error_names_the_gpu() -> None:
    class FakeNVMLError(Exception):
        pass

    class FakePynvml:
        NVMLError = FakeNVMLError

        def nvmlDeviceGetCount(self) -> int:
            return 2

        def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
            if index == 1:
                raise FakeNVMLError("GPU is lost")
            return index

        def nvmlDeviceGetUUID(self, handle: int) -> bytes:
            return b"GPU-aaaa"

        def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
            return handle

        def nvmlDeviceGetPciInfo(self, handle: int) -> object:
            return type("PciInfo", (), {"busId": b"00000000:3B:00.0"})()

    nvml = PynvmlNvml()
    nvml._nvml = FakePynvml()
    with pytest.raises(NvmlUnavailable, match="reading GPU 1: GPU is lost"):
        nvml.gpus()
