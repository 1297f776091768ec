"""GFD labels for an H100-like and an A100-like node, written as an NFD local-source feature file."""

from __future__ import annotations

from pathlib import Path

from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.gfd import architecture_family, gpu_labels
from deviceplugin.gpuconfig import GpuOptions
from harness.fakegpu import A100, H100, TelemetryNvml, gpu_info


def test_h100_node_labels_in_the_features_file(tmp_path: Path) -> None:
    (tmp_path / "sys/class/dmi/id").mkdir(parents=True)
    (tmp_path / "sys/class/dmi/id/product_name").write_text("PowerEdge XE9680\n")
    features = tmp_path / "features.d" / "kubenode-gfd"
    nvml = TelemetryNvml([gpu_info(i, i) for i in range(8)], model=H100)
    options = GpuOptions(features_file=str(features), sysfs_root=str(tmp_path / "sys"))
    now = 1767225600.5
    backend = GpuBackend("nvidia.com/gpu", options, nvml=nvml, telemetry=nvml, wall_clock=lambda: now)
    backend.start(lambda: None)
    backend.stop()
    lines = features.read_text().splitlines()
    assert lines[0].startswith("#")
    assert dict(line.split("=", 1) for line in lines[1:]) == {
        "nvidia.com/cuda.driver-version.full": "550.54.15",
        "nvidia.com/cuda.driver-version.major": "550",
        "nvidia.com/cuda.driver-version.minor": "54",
        "nvidia.com/cuda.driver-version.revision": "15",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "4",
        "nvidia.com/gfd.timestamp": "1767225600",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.machine": "PowerEdge-XE9680",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
    }


def test_a100_node_shared_by_mps() -> None:
    nvml = TelemetryNvml([gpu_info(0, 0), gpu_info(1, 1)], model=A100)
    labels = gpu_labels(
        [nvml.attributes(g.uuid) for g in nvml.gpus()],
        driver_version="535.104.05",
        cuda_driver_version=12020,
        sharing="mps",
        replicas=4,
        timestamp=1,
    )
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-SHARED"
    assert labels["nvidia.com/gpu.family"] == "ampere"
    assert labels["nvidia.com/gpu.memory"] == "40960"
    assert labels["nvidia.com/gpu.count"] == "2"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert labels["nvidia.com/cuda.driver-version.revision"] == "05"
    assert labels["nvidia.com/cuda.runtime-version.full"] == "12.2"
    assert "nvidia.com/gpu.machine" not in labels  # no DMI product name: no label, as GFD
    assert not any(name.startswith(("kubernetes.io/", "k8s.io/")) for name in labels)


def test_family_by_compute_capability() -> None:
    capabilities = ((7, 0), (7, 5), (8, 6), (8, 9), (10, 0), (12, 0), (4, 0))
    assert [architecture_family(*cc) for cc in capabilities] == [
        "volta",
        "turing",
        "ampere",
        "ada-lovelace",
        "blackwell",
        "blackwell",
        "undefined",
    ]


def test_no_gpus_removes_the_features_file(tmp_path: Path) -> None:
    from deviceplugin.gfd import write_features_file

    features = tmp_path / "gfd"
    write_features_file(features, {"nvidia.com/gpu.count": "1"})
    write_features_file(features, {})
    assert not features.exists()
