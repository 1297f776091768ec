"""Pure parts of `kubenode up`: the plugin config it picks, and the check behind --once's exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import cli.up.cluster as cluster
from cli.up.table import shortfalls


@pytest.mark.parametrize(("gpus", "backend"), [(0, "static"), (2, "gpu")])
def test_the_gpu_resource_is_nvmls_when_it_finds_gpus(
    gpus: int, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "nvml_gpu_count", lambda: gpus)
    up = cluster.Cluster(cluster.Options(tmp_path, "/kn-unused", 0, None), progress=print)
    resources = yaml.safe_load(up._default_plugin_config().read_text())["resources"]
    assert [(r["name"], r["backend"]) for r in resources] == [
        ("kubenode.io/cpu", "cpu"),
        ("kubenode.io/gpu", backend),
    ]
    # Only an NVML gpu plugin is started with /metrics (the table's GPU columns).
    assert cluster.has_gpu_backend(up._default_plugin_config()) == (backend == "gpu")


def _pod(limits: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    return {
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
        "status": {"phase": phase},
    }


def _view(
    cpuset: str, devices: dict[str, list[str]], quota: str = "max", memory: str = "max"
) -> dict[str, Any]:
    limits = {"cpuset": cpuset, "cpu_quota": quota, "cpu_period": "100000", "memory_limit": memory}
    return {"kubenode": {"limits": limits, "devices": {"main": devices}}}


def test_a_pod_that_got_what_it_asked_for() -> None:
    pod = _pod({"kubenode.io/cpu": 2, "cpu": "500m", "memory": "32Mi"})
    view = _view("0-1", {"kubenode.io/cpu": ["cpu0", "cpu1"]}, quota="50000", memory=str(32 * 2**20))
    assert shortfalls(pod, view) == []


def test_each_shortfall_is_named() -> None:
    pod = _pod({"kubenode.io/cpu": 2, "kubenode.io/gpu": 1, "cpu": "500m", "memory": "32Mi"})
    view = _view("0", {"kubenode.io/cpu": ["cpu0"]})
    assert shortfalls(pod, view) == [
        "main: kubenode.io/cpu 1 allocated, 2 asked",
        "main: kubenode.io/gpu 0 allocated, 1 asked",
        "cpuset '0' has 1 CPUs, 2 asked",
        "cpu quota max, 50000 expected for 500m",
        "memory limit max, 33554432 expected",
    ]
    failed = _pod({}, phase="Failed")
    failed["status"]["message"] = "Pod was rejected"
    assert shortfalls(failed, None) == ["phase Failed: Pod was rejected"]
