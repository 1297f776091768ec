"""A fake NVML with telemetry, a fake driver install (loader cache, libraries, nvidia-smi, /dev), a GPU's
DRM nodes in a fake sysfs and /dev, and a PodResources server over a real unix socket: the GPU backend's
tests and benchmarks/gpu_metrics_bench.py."""

from __future__ import annotations

import queue
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from deviceplugin.backends.nvml import GpuAttributes, GpuInfo, GpuSample, ProcessSample, XidEvent
from kubenode.api.podresources.v1 import api_pb2, api_pb2_grpc

DRIVER = "550.54.15"
LIB_DIR = "/usr/lib/x86_64-linux-gnu"
H100 = ("NVIDIA H100 80GB HBM3", 81559, 9, 0)
A100 = ("NVIDIA A100-SXM4-40GB", 40960, 8, 0)


def gpu_info(index: int, minor: int) -> GpuInfo:
    return GpuInfo(index, f"GPU-{index:04d}aaaa", minor, f"00000000:{0x10 + index:02X}:00.0")


@dataclass
class TelemetryNvml:
    """GPUs of one model; samples are what the test sets in `samples` (default: idle)."""

    gpus_: list[GpuInfo]
    model: tuple[str, int, int, int] = H100
    samples: dict[str, GpuSample] = field(default_factory=dict)
    events: queue.Queue[XidEvent] = field(default_factory=queue.Queue)

    def init(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def gpus(self) -> list[GpuInfo]:
        return list(self.gpus_)

    def wait_xid(self, timeout_s: float) -> XidEvent | None:
        try:
            return self.events.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def probe(self, uuid: str) -> bool:
        return True

    def driver_version(self) -> str:
        return DRIVER

    def cuda_driver_version(self) -> int:
        return 12040

    def attributes(self, uuid: str) -> GpuAttributes:
        name, memory, major, minor = self.model
        return GpuAttributes(uuid, name, memory, major, minor, mig_capable=major >= 8)

    def sample(self, uuid: str) -> GpuSample:
        return self.samples.get(uuid) or GpuSample(uuid, 0, 0, self.model[1], 35, 60.5, 1000, ())


def process(pid: int, used_mib: int, sm_util: int) -> ProcessSample:
    return ProcessSample(pid, used_mib, sm_util)


def fake_driver(root: Path, minors: Iterable[int], control: Iterable[str]) -> tuple[Path, Path, str]:
    """A driver root with two versions' libraries, sonames, nvidia-smi; a /dev; the `ldconfig -p` text."""
    libs = root / "driver" / LIB_DIR.lstrip("/")
    libs.mkdir(parents=True)
    cache = ["4 libs found in cache `/etc/ld.so.cache'"]
    for name, soname in (("libcuda.so", "libcuda.so.1"), ("libnvidia-ml.so", "libnvidia-ml.so.1")):
        (libs / f"{name}.{DRIVER}").write_text("elf")
        (libs / soname).symlink_to(f"{name}.{DRIVER}")
        cache.append(f"\t{soname} (libc6,x86-64) => {LIB_DIR}/{soname}")
    (libs / "libcuda.so.535.104.05").write_text("an old driver's leftover")
    (libs / "libz.so.1").write_text("not the driver's")
    cache.append(f"\tlibz.so.1 (libc6,x86-64) => {LIB_DIR}/libz.so.1")
    (root / "driver/usr/bin").mkdir(parents=True)
    (root / "driver/usr/bin/nvidia-smi").write_text("#!/bin/sh\n")
    dev = root / "dev"
    dev.mkdir()
    for name in [f"nvidia{m}" for m in minors] + list(control):
        (dev / name).touch()
    return root / "driver", dev, "\n".join(cache) + "\n"


def fake_drm(sysfs: Path, dev: Path, gpu: GpuInfo, card: int, render: int) -> None:
    """The GPU's DRM nodes as nvidia-drm and udev make them: sysfs entries under its PCI device,
    `<dev>/dri/card<card>` and `renderD<render>`, and the `dri/by-path` links to them."""
    drm = sysfs / "bus/pci/devices" / gpu.pci_address / "drm"
    by_path = dev / "dri/by-path"
    by_path.mkdir(parents=True, exist_ok=True)
    for name, kind in ((f"card{card}", "card"), (f"renderD{render}", "render")):
        (drm / name).mkdir(parents=True)
        (dev / "dri" / name).touch()
        (by_path / f"pci-{gpu.pci_address}-{kind}").symlink_to(f"../{name}")


class _Lister(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self) -> None:
        self.pods: list[api_pb2.PodResources] = []

    def List(
        self, request: api_pb2.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ListPodResourcesResponse:
        return api_pb2.ListPodResourcesResponse(pod_resources=self.pods)


class PodResources:
    """What a kubelet's PodResources List answers; `hold` adds a container holding devices."""

    def __init__(self, lister: _Lister) -> None:
        self._lister = lister

    def hold(self, namespace: str, pod: str, container: str, resource: str, ids: list[str]) -> None:
        devices = api_pb2.ContainerDevices(resource_name=resource, device_ids=ids)
        self._lister.pods.append(
            api_pb2.PodResources(
                name=pod,
                namespace=namespace,
                containers=[api_pb2.ContainerResources(name=container, devices=[devices])],
            )
        )


@contextmanager
def podresources_server(socket_path: Path) -> Iterator[PodResources]:
    lister = _Lister()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(lister, server)
    server.add_insecure_port(f"unix://{socket_path}")
    server.start()
    try:
        yield PodResources(lister)
    finally:
        server.stop(None).wait()
