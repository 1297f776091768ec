"""The GPU columns of `kubenode up`'s table: each pod's GPU utilization and framebuffer memory, read from
the GPU plugin's /metrics (dcgm-exporter's DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED, labels
namespace/pod; deviceplugin.gpumetrics).

Flow: one scrape per table refresh (`scrape`) -> `usage_by_pod` sums a pod's series (a pod holding two
GPUs shows the sum of both utilizations, as the series are per GPU; a shared GPU's series are already split
per pod) -> the table prints them for pods that appear there. Series of GPUs nobody holds (empty pod label)
are left out. A failed scrape (the plugin restarting) gives no figures, so the columns show "-".
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
SCRAPE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class GpuUsage:
    util_percent: float
    fb_used_mib: float


def usage_by_pod(exposition: str) -> dict[tuple[str, str], GpuUsage]:
    """(namespace, pod) -> summed utilization % and framebuffer MiB over the pod's GPU series."""
    util: dict[tuple[str, str], float] = {}
    used: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(exposition):
        if family.name not in (UTIL, FB_USED):
            continue
        into = util if family.name == UTIL else used
        for sample in family.samples:
            pod = sample.labels.get("pod", "")
            if not pod:
                continue
            key = (sample.labels.get("namespace") or "default", pod)
            into[key] = into.get(key, 0.0) + sample.value
    return {key: GpuUsage(util.get(key, 0.0), used.get(key, 0.0)) for key in util.keys() | used.keys()}


def scrape(url: str) -> dict[tuple[str, str], GpuUsage]:
    """One GET of the plugin's /metrics; {} when it does not answer (the table then shows "-")."""
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
            return usage_by_pod(response.read().decode())
    except (OSError, ValueError):
        return {}


def columns(usage: GpuUsage | None) -> tuple[str, str]:
    if usage is None:
        return "-", "-"
    return f"{usage.util_percent:.0f}%", f"{usage.fb_used_mib:.0f}Mi"
