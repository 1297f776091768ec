"""Per-pod GPU metrics with dcgm-exporter's names and labels, from NVML, on the plugin's /metrics.

Flow: at each scrape `GpuMetricsCollector.collect` samples every GPU of a gpu resource through
NVML (`NvmlTelemetry.sample`), asks PodResources `List` which containers hold which GPU
(deviceplugin.podattribution) and emits one series per (GPU, holder) with the labels
`gpu, UUID, pci_bus_id, device, modelName, Hostname, container, namespace, pod` (empty pod labels
for a GPU nobody holds). A GPU held by several pods (time-slicing, MPS) has its utilization and
framebuffer use split per process as dcgm-exporter does for shared GPUs: each compute process's
pod comes from its cgroup, and a pod's series sums its processes; device-wide values (temperature,
power, energy, free memory, Xid) repeat on each pod's series.

DCGM_FI_DEV_XID_ERRORS is, as in DCGM, the value of the last Xid seen (0: none); the number of Xids
is kubenode_gpu_xid_events_total.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deviceplugin.backends.gpuhealth import GpuHealth
from deviceplugin.backends.nvml import GpuAttributes, GpuInfo, GpuSample, NvmlTelemetry
from deviceplugin.gpuconfig import GpuOptions
from deviceplugin.podattribution import Holder, PodResourcesClient, pod_uid_of, pods_by_uid

if TYPE_CHECKING:
    from prometheus_client.core import Metric

LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "container", "namespace", "pod"]
# name -> help, as dcgm-exporter's default counters describe them (etc/default-counters.csv)
GAUGES = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "Total energy consumption since boot (in mJ).",
    "DCGM_FI_DEV_XID_ERRORS": "Value of the last XID error encountered.",
}
XID_EVENTS = "kubenode_gpu_xid_events"


@dataclass(frozen=True)
class GpuSource:
    """One gpu resource's view for metrics: its GPUs by device ID, NVML, health and options."""

    resource_name: str
    gpus: dict[str, GpuInfo]
    telemetry: NvmlTelemetry
    health: GpuHealth
    options: GpuOptions


class GpuMetricsCollector:
    def __init__(self, sources: Sequence[GpuSource], hostname: str | None = None) -> None:
        self._sources = list(sources)
        self._hostname = hostname or socket.gethostname()
        self._attributes: dict[str, GpuAttributes] = {}  # fixed while the driver runs: read once
        self._podresources = {
            s.options.pod_resources_socket: PodResourcesClient(s.options.pod_resources_socket)
            for s in sources
        }

    def _model(self, source: GpuSource, uuid: str) -> str:
        if uuid not in self._attributes:
            self._attributes[uuid] = source.telemetry.attributes(uuid)
        return self._attributes[uuid].name

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families = {name: GaugeMetricFamily(name, text, labels=LABELS) for name, text in GAUGES.items()}
        xids = CounterMetricFamily(XID_EVENTS, "Number of Xid events seen, ignored ones too", labels=LABELS)
        for source in self._sources:
            for labels, values, xid_count in self._series(source):
                for family, value in zip(families.values(), values, strict=True):
                    family.add_metric(labels, value)
                xids.add_metric(labels, xid_count)
        yield from families.values()
        yield xids

    def _series(self, source: GpuSource) -> Iterator[tuple[list[str], tuple[float, ...], int]]:
        """(labels, the GAUGES' values in order, Xid count) per GPU and holder."""
        client = self._podresources[source.options.pod_resources_socket]
        holders = client.device_holders(source.resource_name) or {}
        uids: dict[str, tuple[str, str]] | None = None  # read once per scrape, only for shared GPUs
        for device_id, gpu in source.gpus.items():
            sample = source.telemetry.sample(gpu.uuid)
            held = holders.get(device_id, [])
            model = self._model(source, gpu.uuid)
            base = [str(gpu.index), gpu.uuid, gpu.pci_bus_id, f"nvidia{gpu.minor}", model, self._hostname]
            split: dict[Holder, tuple[int, int]] = {}
            if len(held) > 1:
                if uids is None:
                    uids = pods_by_uid(source.options.pod_logs_dir)
                split = _split_by_pod(sample, held, uids, source.options.proc_root)
            last_xid = source.health.last_xid.get(gpu.uuid, 0)
            xid_count = source.health.xid_count.get(gpu.uuid, 0)
            holders_or_none: list[Holder | None] = list(held) or [None]  # a free GPU: empty pod labels
            for holder in holders_or_none:
                who = [holder.container, holder.namespace, holder.pod] if holder else ["", "", ""]
                whole = (sample.gpu_util, sample.fb_used_mib)
                util, used = split.get(holder, whole) if holder else whole
                values = (
                    util,
                    used,
                    sample.fb_free_mib,
                    sample.temperature_c,
                    sample.power_w,
                    sample.energy_mj,
                    last_xid,
                )
                yield base + who, values, xid_count


def _split_by_pod(
    sample: GpuSample, held: list[Holder], uids: dict[str, tuple[str, str]], proc_root: str
) -> dict[Holder, tuple[int, int]]:
    """Each holder's (utilization %, framebuffer MiB): the sums over its pod's processes."""
    by_pod: dict[tuple[str, str], tuple[int, int]] = {}
    for process in sample.processes:
        uid = pod_uid_of(process.pid, proc_root)
        pod = uids.get(uid) if uid else None
        if pod is None:
            continue  # not a pod's process, or a pod we cannot name: as dcgm-exporter, unattributed
        util, used = by_pod.get(pod, (0, 0))
        by_pod[pod] = (util + process.sm_util, used + process.used_mib)
    # Containers of one pod share its processes' figures (the cgroup names the pod, not the container).
    return {h: by_pod.get((h.namespace, h.pod), (0, 0)) for h in held}
