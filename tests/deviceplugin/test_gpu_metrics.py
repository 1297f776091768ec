"""Per-pod GPU metrics with dcgm-exporter's names and labels: pods from PodResources List over a real
unix socket, processes of a shared GPU attributed through their cgroup and the pod log directories."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.backends.nvml import GpuSample, XidEvent
from deviceplugin.gpuconfig import GpuOptions
from deviceplugin.gpumetrics import GAUGES, GpuMetricsCollector
from harness.fakegpu import TelemetryNvml, gpu_info, podresources_server, process
from tests.deviceplugin.support import wait_until

UID_A = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
UID_B = "11111111-2222-3333-4444-555555555555"


def scrape(collector: GpuMetricsCollector) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        family.name: [(s.labels, s.value) for s in family.samples]
        for family in text_string_to_metric_families(text)
    }


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """/proc with two pods' processes (cgroupfs and systemd layouts), and the pod log directories."""
    for pid, line in (
        (101, f"12:memory:/kubepods/burstable/pod{UID_A}/abc\n"),
        (202, f"0::/kubepods.slice/kubepods-pod{UID_B.replace('-', '_')}.slice/cri-containerd-x.scope\n"),
        (303, "0::/user.slice/session-1.scope\n"),  # not a pod's
    ):
        (tmp_path / "proc" / str(pid)).mkdir(parents=True)
        (tmp_path / "proc" / str(pid) / "cgroup").write_text(line)
    for name in (f"ml_trainer_{UID_A}", f"ml_notebook_{UID_B}"):
        (tmp_path / "pods" / name).mkdir(parents=True)
    return tmp_path


def backend_for(host: Path, nvml: TelemetryNvml) -> GpuBackend:
    options = GpuOptions(
        pod_resources_socket=str(host / "pr.sock"),
        pod_logs_dir=str(host / "pods"),
        proc_root=str(host / "proc"),
        probe_interval_seconds=0.01,
    )
    return GpuBackend("nvidia.com/gpu", options, nvml=nvml, telemetry=nvml)


def test_a_pod_holding_a_gpu_gets_dcgm_series(host: Path) -> None:
    gpus = [gpu_info(0, 0), gpu_info(1, 3)]
    nvml = TelemetryNvml(gpus)
    nvml.samples[gpus[1].uuid] = GpuSample(gpus[1].uuid, 87, 30000, 51559, 61, 312.25, 123456789, ())
    backend = backend_for(host, nvml)
    backend.start(lambda: None)
    try:
        nvml.events.put(XidEvent(gpus[1].uuid, 31))  # an application error: counted, GPU still healthy
        assert wait_until(lambda: backend.health.xid_count.get(gpus[1].uuid) == 1, 10)
        source = backend.metrics_source()
        assert source is not None
        with podresources_server(host / "pr.sock") as podresources:
            podresources.hold("ml", "trainer", "main", "nvidia.com/gpu", [gpus[1].uuid])
            podresources.hold("ml", "other", "main", "example.com/fpga", [gpus[0].uuid])  # not ours
            metrics = scrape(GpuMetricsCollector([source], hostname="node-1"))
    finally:
        backend.stop()
    assert set(GAUGES) <= set(metrics)
    held = {
        "gpu": "1",
        "UUID": gpus[1].uuid,
        "pci_bus_id": gpus[1].pci_bus_id,
        "device": "nvidia3",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "node-1",
        "container": "main",
        "namespace": "ml",
        "pod": "trainer",
    }
    free = held | {"gpu": "0", "UUID": gpus[0].uuid, "pci_bus_id": gpus[0].pci_bus_id, "device": "nvidia0"}
    free |= {"container": "", "namespace": "", "pod": ""}
    assert metrics["DCGM_FI_DEV_GPU_UTIL"] == [(free, 0), (held, 87)]
    assert metrics["DCGM_FI_DEV_FB_USED"][1] == (held, 30000)
    assert metrics["DCGM_FI_DEV_FB_FREE"][1] == (held, 51559)
    assert metrics["DCGM_FI_DEV_GPU_TEMP"][1] == (held, 61)
    assert metrics["DCGM_FI_DEV_POWER_USAGE"][1] == (held, 312.25)
    assert metrics["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][1] == (held, 123456789)
    assert metrics["DCGM_FI_DEV_XID_ERRORS"][1] == (held, 31)
    assert metrics["kubenode_gpu_xid_events"][1] == (held, 1)


def test_a_shared_gpu_is_split_per_process(host: Path) -> None:
    gpu = gpu_info(0, 0)
    nvml = TelemetryNvml([gpu])
    processes = (process(101, 10000, 40), process(202, 6000, 25), process(303, 500, 5))
    nvml.samples[gpu.uuid] = GpuSample(gpu.uuid, 70, 16500, 65059, 50, 200.0, 5, processes)
    backend = backend_for(host, nvml)
    source = backend.metrics_source()
    assert source is not None
    with podresources_server(host / "pr.sock") as podresources:
        podresources.hold("ml", "trainer", "train", "nvidia.com/gpu", [f"{gpu.uuid}::0"])
        podresources.hold("ml", "notebook", "lab", "nvidia.com/gpu", [f"{gpu.uuid}::3"])
        metrics = scrape(GpuMetricsCollector([source], hostname="node-1"))
    per_pod = {s[0]["pod"]: s[1] for s in metrics["DCGM_FI_DEV_GPU_UTIL"]}
    assert per_pod == {"trainer": 40, "notebook": 25}  # process 303 belongs to no pod
    assert {s[0]["pod"]: s[1] for s in metrics["DCGM_FI_DEV_FB_USED"]} == {"trainer": 10000, "notebook": 6000}
    assert {s[0]["container"] for s in metrics["DCGM_FI_DEV_FB_FREE"]} == {"train", "lab"}


def test_without_podresources_the_gpus_are_still_reported(host: Path) -> None:
    nvml = TelemetryNvml([gpu_info(0, 0)])
    source = backend_for(host, nvml).metrics_source()
    assert source is not None
    metrics = scrape(GpuMetricsCollector([source], hostname="node-1"))
    assert [s[0]["pod"] for s in metrics["DCGM_FI_DEV_GPU_UTIL"]] == [""]


def test_the_plugins_metrics_include_a_time_sliced_gpu_resource(host: Path) -> None:
    from types import SimpleNamespace

    from deviceplugin.metrics import PrometheusRecorder
    from deviceplugin.replicas import ReplicatedBackend

    nvml = TelemetryNvml([gpu_info(0, 0)])
    backend = ReplicatedBackend(backend_for(host, nvml), 2)
    resource = SimpleNamespace(
        config=SimpleNamespace(name="nvidia.com/gpu"),
        backend=backend,
        state=SimpleNamespace(snapshot=lambda: (0, backend.devices())),
        endpoint=SimpleNamespace(open_streams=lambda: 0),
    )
    recorder = PrometheusRecorder(SimpleNamespace(resources=[resource]))  # type: ignore[arg-type]
    text = recorder.exposition().decode()
    assert 'DCGM_FI_DEV_GPU_UTIL{Hostname="' in text and f'UUID="{gpu_info(0, 0).uuid}"' in text
    assert 'kubenode_deviceplugin_devices{health="Healthy",resource="nvidia.com/gpu"} 2.0' in text
