"""What the gpu backend publishes at start besides its devices: the CDI spec, GFD labels, MPS daemons.

Each function turns NVML's telemetry and the options into files or processes and reports a failure in
one line naming the file or GPU; the backend keeps serving its GPUs either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from deviceplugin.backends.nvml import GpuInfo, NvmlTelemetry
from deviceplugin.gfd import gpu_labels, read_machine_type, write_features_file
from deviceplugin.gpucdi import GpuSpecError, list_loader_cache, write_gpu_spec
from deviceplugin.gpuconfig import GpuOptions
from deviceplugin.mps import MpsDaemon, limits_for

log = logging.getLogger(__name__)


def publish_cdi_spec(
    resource_name: str,
    options: GpuOptions,
    gpus: Sequence[GpuInfo],
    telemetry: NvmlTelemetry,
    loader_cache: Callable[[], str] | None,
) -> Path | None:
    try:
        text = loader_cache() if loader_cache is not None else list_loader_cache(options.ldconfig)
        path = write_gpu_spec(
            options.cdi_spec_dir,
            resource_name,
            options.cdi_kind,
            gpus,
            telemetry.driver_version(),
            driver_root=options.driver_root,
            dev_root=options.dev_root,
            sysfs_root=options.sysfs_root,
            loader_cache=text,
        )
    except (GpuSpecError, OSError) as exc:
        log.error("gpu backend for %s: CDI spec not written: %s", resource_name, exc)
        return None
    log.info("gpu backend for %s: CDI spec %s", resource_name, path)
    return path


def publish_labels(options: GpuOptions, gpus: Sequence[GpuInfo], telemetry: NvmlTelemetry, now: int) -> None:
    assert options.features_file is not None
    labels = gpu_labels(
        [telemetry.attributes(g.uuid) for g in gpus],
        driver_version=telemetry.driver_version(),
        cuda_driver_version=telemetry.cuda_driver_version(),
        sharing=options.sharing,
        replicas=options.shared_replicas,
        machine=read_machine_type(options.sysfs_root),
        timestamp=now,
    )
    try:
        write_features_file(Path(options.features_file), labels)
    except OSError as exc:
        log.error("GPU labels not written to %s: %s", options.features_file, exc.strerror or exc)


def start_mps(options: GpuOptions, gpus: Sequence[GpuInfo], telemetry: NvmlTelemetry) -> dict[str, MpsDaemon]:
    """One daemon per GPU; on a failure the ones started are stopped and MpsError raised."""
    daemons: dict[str, MpsDaemon] = {}
    try:
        for gpu in gpus:
            limits = limits_for(telemetry.attributes(gpu.uuid).memory_mib, options.shared_replicas)
            daemon = MpsDaemon(options.mps_root, gpu.uuid, options.mps_control, limits)
            daemons[gpu.uuid] = daemon
            daemon.start()
    except BaseException:
        for daemon in daemons.values():
            daemon.stop()
        raise
    return daemons
