"""NVIDIA GPUs via NVML: IDs by UUID or index, NUMA node from the PCI device, Xid-driven health.

Where NVML is absent the backend says so in one line and advertises nothing
(or raises BackendError with failOnInitError). A monitor thread blocks in NVML's
event wait; only while some GPU is unhealthy does it also probe, to let it recover.
With NVML's telemetry, `start` also writes the GPUs' CDI spec (deviceplugin.gpucdi), GFD's
labels (deviceplugin.gfd) and starts the MPS daemons (deviceplugin.mps); `metrics_source` is
what deviceplugin.gpumetrics reads at a scrape. A failure of one of these is one line and the
GPUs are still served.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from deviceplugin.backend import Backend, BackendError, ContainerAllocation, Device, OnChange
from deviceplugin.backends.gpuhealth import GpuHealth
from deviceplugin.backends.nvml import GpuInfo, Nvml, NvmlTelemetry, NvmlUnavailable, PynvmlNvml
from deviceplugin.config import DeviceNode
from deviceplugin.gpuconfig import GpuOptions
from deviceplugin.gpumetrics import GpuSource
from deviceplugin.mps import MpsDaemon, MpsError

log = logging.getLogger(__name__)

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
# CUDA's own filter, by UUID whatever the ID strategy (CUDA takes `GPU-<uuid>` entries and numbers the ones
# it sees from 0). The container's /dev and device cgroup already hold only its GPUs, so CUDA would see
# just those anyway; the variable makes the same true where they do not (a process pod on a host without
# device isolation) and tells a user's program which GPUs are its own.
CUDA_VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"
CONTROL_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
IDLE_WAIT_S = 1.0  # how often the monitor looks up from NVML's event wait to notice stop()


class GpuBackend(Backend):
    allocate_blocks = False  # from memory, and a stat of each /dev node

    def __init__(
        self,
        resource_name: str,
        options: GpuOptions,
        nvml: Nvml | None = None,
        clock: Callable[[], float] = time.monotonic,
        telemetry: NvmlTelemetry | None = None,
        loader_cache: Callable[[], str] | None = None,  # `ldconfig -p` text; default runs options.ldconfig
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.options = options
        self.resource_name = resource_name
        if nvml is None:  # the real NVML gives both; an injected one gives telemetry only if passed too
            real = PynvmlNvml()
            nvml, telemetry = real, telemetry or real
        self._nvml: Nvml = nvml
        self.telemetry = telemetry
        self._loader_cache = loader_cache
        self._wall_clock = wall_clock
        self.mps: dict[str, MpsDaemon] = {}  # uuid -> its daemon, with sharing mps
        self._clock = clock
        self._gpus: dict[str, GpuInfo] = {}  # device ID -> GPU
        self._numa: dict[str, tuple[int, ...]] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.available = self._discover(resource_name)
        uuids = [g.uuid for g in self._gpus.values()]
        self.health = GpuHealth(uuids, options.ignored_xids, options.recovery_seconds)

    def _discover(self, resource_name: str) -> bool:
        try:
            self._nvml.init()
            try:
                gpus = self._nvml.gpus()
            except NvmlUnavailable:
                self._nvml.shutdown()  # initialised, so release it before giving up
                raise
        except NvmlUnavailable as exc:
            message = f"gpu backend for {resource_name}: NVML unavailable ({exc}); advertising no GPUs"
            if self.options.fail_on_init_error:
                raise BackendError(message) from None
            log.warning("%s", message)
            return False
        for gpu in gpus:
            device_id = gpu.uuid if self.options.id_strategy == "uuid" else str(gpu.index)
            self._gpus[device_id] = gpu
            self._numa[device_id] = _numa_node(self.options.sysfs_root, gpu.pci_address)
        return True

    def devices(self) -> list[Device]:
        with self._lock:
            return [Device(i, self.health.healthy(g.uuid), self._numa[i]) for i, g in self._gpus.items()]

    def allocate(self, ids: Sequence[str]) -> ContainerAllocation:
        dev = Path(self.options.dev_root)
        cdi = self.options.cdi_kind
        nodes = [f"nvidia{self._gpus[i].minor}" for i in ids] + list(CONTROL_DEVICES)
        allocation = ContainerAllocation(
            envs={
                VISIBLE_DEVICES_ENV: ",".join(ids),
                CUDA_VISIBLE_DEVICES_ENV: ",".join(self._gpus[i].uuid for i in ids),
            },
            device_nodes=[DeviceNode(str(dev / n), f"/dev/{n}", "rw") for n in nodes if (dev / n).exists()],
            cdi_devices=[f"{cdi}={self._gpus[i].uuid}" for i in ids] if self.options.cdi else [],
        )
        for device_id in ids:
            daemon = self.mps.get(self._gpus[device_id].uuid)
            if daemon is not None:
                envs, mounts = daemon.allocation()
                allocation.merge(ContainerAllocation(envs=envs, mounts=mounts))
        return allocation

    def metrics_source(self) -> GpuSource | None:
        if self.telemetry is None or not self._gpus:
            return None
        return GpuSource(self.resource_name, dict(self._gpus), self.telemetry, self.health, self.options)

    def start(self, on_change: OnChange) -> None:
        if not self._gpus:
            return
        if self.telemetry is not None:
            try:
                self._publish(self.telemetry)
            except Exception as exc:  # e.g. an NVML error reading attributes: the GPUs are still served
                log.error("gpu backend for %s: publishing GPU files failed: %s", self.resource_name, exc)
        self._thread = threading.Thread(
            target=self._monitor, args=(on_change,), name="gpu-health", daemon=True
        )
        self._thread.start()

    def _publish(self, telemetry: NvmlTelemetry) -> None:
        """The CDI spec, GFD's labels and the MPS daemons; each failure is one line, the GPUs stay served."""
        from deviceplugin.gpupublish import publish_cdi_spec, publish_labels, start_mps

        gpus = sorted(self._gpus.values(), key=lambda g: g.index)
        if self.options.cdi:
            publish_cdi_spec(self.resource_name, self.options, gpus, telemetry, self._loader_cache)
        if self.options.features_file:
            publish_labels(self.options, gpus, telemetry, int(self._wall_clock()))
        if self.options.sharing == "mps":
            try:
                self.mps = start_mps(self.options, gpus, telemetry)
            except MpsError as exc:
                log.error("%s", exc)

    def stop(self) -> None:
        for daemon in self.mps.values():
            daemon.stop()
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.available:
            self._nvml.shutdown()
            self.available = False

    def _monitor(self, on_change: OnChange) -> None:
        next_probe = 0.0
        while not self._stopping.is_set():
            probing = bool(self.health.unhealthy())
            wait = min(IDLE_WAIT_S, max(0.0, next_probe - self._clock())) if probing else IDLE_WAIT_S
            try:
                event = self._nvml.wait_xid(wait)
            except Exception:  # a broken NVML must not kill health watching for good
                log.exception("NVML event wait failed")
                self._stopping.wait(IDLE_WAIT_S)
                continue
            changed = False
            if event is not None:
                with self._lock:
                    changed = self.health.on_xid(event.uuid, event.xid)
                if changed:
                    next_probe = self._clock() + self.options.probe_interval_seconds
            now = self._clock()
            if self.health.unhealthy() and now >= next_probe:
                for uuid in self.health.unhealthy():
                    ok = self._nvml.probe(uuid)
                    with self._lock:
                        changed |= self.health.on_probe(uuid, ok, now)
                next_probe = now + self.options.probe_interval_seconds
            if changed:
                on_change()


def _numa_node(sysfs_root: str, address: str) -> tuple[int, ...]:
    """NUMA node of a PCI device (its sysfs address) from sysfs; -1 or missing means no topology."""
    try:
        node = int(Path(sysfs_root, "bus/pci/devices", address, "numa_node").read_text().strip())
    except (OSError, ValueError):
        return ()
    return (node,) if node >= 0 else ()
