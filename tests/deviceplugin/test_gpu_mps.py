"""MPS sharing: NVIDIA's config shape, one daemon per GPU with one replica's limits, pods' env and mounts.

`nvidia-cuda-mps-control` is a fake script that records how it was started and what it was told;
the daemon really runs in its own mount namespace whose /dev/shm is the GPU's shm directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.config import ConfigError, parse_config
from deviceplugin.manager import PluginManager
from harness.fakegpu import H100, TelemetryNvml, gpu_info
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from tests.deviceplugin.conftest import Kubelet
from tests.deviceplugin.support import plugin_client

FAKE_CONTROL = r"""#!/bin/sh
# Records: its arguments and environment, what /dev/shm is, and the commands on stdin.
out="$CUDA_MPS_LOG_DIRECTORY/fake-control.log"
if [ "$1" = "-d" ]; then
  shm=$(stat -c %d:%i /dev/shm)
  echo "daemon visible=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY shm=$shm" >> "$out"
  exit 0
fi
while read -r line; do echo "command $line" >> "$out"; done
"""


def fake_control(directory: Path) -> Path:
    control = directory / "nvidia-cuda-mps-control"
    control.write_text(FAKE_CONTROL)
    control.chmod(0o755)
    return control


def mps_config(mps_replicas: int = 4, **beside: object) -> dict[str, Any]:
    """A config sharing nvidia.com/gpu by MPS; `beside` adds fields to the resource."""
    resource: dict[str, Any] = {
        "name": "nvidia.com/gpu",
        "backend": "gpu",
        "gpu": {"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": mps_replicas}]}}},
    }
    return {"resources": [resource | beside]}


def test_config_sets_replicas_and_refuses_both_strategies() -> None:  # one line naming the field
    resource = parse_config(mps_config()).resources[0]
    assert (resource.replicas, resource.gpu.sharing, resource.gpu.shared_replicas) == (4, "mps", 4)
    both = mps_config()
    sharing = both["resources"][0]["gpu"]["sharing"]
    sharing["timeSlicing"] = {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}
    with pytest.raises(ConfigError) as refused:
        parse_config(both, source="plugin.yaml")
    assert str(refused.value) == (
        "plugin.yaml: resources[0].gpu.sharing.mps: "
        "timeSlicing and mps are exclusive for a resource; choose one"
    )
    with pytest.raises(ConfigError, match=r"resources\[0\]\.replicas: given beside gpu\.sharing \(mps\)"):
        parse_config(mps_config(4, replicas=2))
    with pytest.raises(ConfigError, match=r"sharing\.mps\.resources\[0\]\.name: 'nvidia\.com/other' is not"):
        other = mps_config()
        other["resources"][0]["gpu"]["sharing"]["mps"]["resources"][0]["name"] = "nvidia.com/other"
        parse_config(other)


def test_daemon_per_gpu_with_a_replicas_share_and_pod_env(tmp_path: Path) -> None:
    config = mps_config()
    config["resources"][0]["gpu"]["mpsRoot"] = str(tmp_path / "mps")
    config["resources"][0]["gpu"]["mpsControl"] = str(fake_control(tmp_path))
    options = parse_config(config).resources[0].gpu
    gpus = [gpu_info(0, 0), gpu_info(1, 1)]
    nvml = TelemetryNvml(gpus, model=H100)
    backend = GpuBackend("nvidia.com/gpu", options, nvml=nvml, telemetry=nvml)
    backend.start(lambda: None)
    try:
        allocation = backend.allocate([gpus[1].uuid])
    finally:
        backend.stop()
    root = tmp_path / "mps" / gpus[1].uuid
    shm = os.stat(root / "shm")
    assert (root / "log/fake-control.log").read_text().splitlines() == [
        f"daemon visible={gpus[1].uuid} pipe={root / 'pipe'} shm={shm.st_dev}:{shm.st_ino}",
        "command set_default_device_pinned_mem_limit 0 20389M",  # 81559 MiB / 4
        "command set_default_active_thread_percentage 25",
        "command quit",
    ]
    assert allocation.envs["CUDA_MPS_PIPE_DIRECTORY"] == str(root / "pipe")
    assert [(m.host_path, m.container_path, m.read_only) for m in allocation.mounts] == [
        (str(root / "pipe"), str(root / "pipe"), False),
        (str(root / "shm"), "/dev/shm", False),
    ]
    assert (tmp_path / "mps" / gpus[0].uuid / "log/fake-control.log").exists()  # its own daemon too


def test_a_failing_daemon_is_one_line_and_gpus_still_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = mps_config()
    config["resources"][0]["gpu"]["mpsRoot"] = str(tmp_path / "mps")
    config["resources"][0]["gpu"]["mpsControl"] = "/nonexistent/nvidia-cuda-mps-control"
    nvml = TelemetryNvml([gpu_info(0, 0)], model=H100)
    backend = GpuBackend("nvidia.com/gpu", parse_config(config).resources[0].gpu, nvml=nvml, telemetry=nvml)
    backend.start(lambda: None)
    try:
        assert len(backend.devices()) == 1 and backend.mps == {}
        assert "CUDA_MPS_PIPE_DIRECTORY" not in backend.allocate([gpu_info(0, 0).uuid]).envs
    finally:
        backend.stop()
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].startswith(f"MPS for GPU {gpu_info(0, 0).uuid}: starting")


def test_more_than_one_mps_replica_is_refused_in_one_line_as_nvidia_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kubelet: Kubelet,
    run_plugin: Callable[..., PluginManager],
) -> None:
    """A container talks to one MPS daemon (one CUDA_MPS_PIPE_DIRECTORY): NVIDIA's plugin refuses an Allocate
    of more than one MPS replica, whatever failRequestsGreaterThanOne says; so does ours, over the socket."""
    gpus = [gpu_info(0, 0), gpu_info(1, 1)]
    monkeypatch.setattr("deviceplugin.backends.gpu.PynvmlNvml", lambda: TelemetryNvml(gpus, model=H100))
    config = mps_config()
    config["resources"][0]["gpu"]["mpsRoot"] = str(tmp_path / "mps")
    config["resources"][0]["gpu"]["mpsControl"] = str(fake_control(tmp_path))
    manager = run_plugin(config)
    assert manager.all_registered.wait(10)
    with plugin_client(manager.resource("nvidia.com/gpu").endpoint.socket_path) as stub:

        def allocate(*ids: str) -> Any:
            request = api_pb2.ContainerAllocateRequest(devices_ids=ids)
            answer = stub.Allocate(api_pb2.AllocateRequest(container_requests=[request]), timeout=5)
            return answer.container_responses[0]

        two_gpus = [f"{gpus[0].uuid}::0", f"{gpus[1].uuid}::0"]
        one_gpu_twice = [f"{gpus[0].uuid}::0", f"{gpus[0].uuid}::1"]
        for ids in (two_gpus, one_gpu_twice):
            with pytest.raises(grpc.RpcError) as refused:
                allocate(*ids)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.value.details() == (
                "nvidia.com/gpu: Allocate: 2 replicas requested; "
                "with MPS sharing the maximum request size for shared resources is 1"
            )
        one = allocate(f"{gpus[1].uuid}::3")  # and the plugin goes on serving
    assert one.envs["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "mps" / gpus[1].uuid / "pipe")
