"""Agent settings, admission arithmetic and env resolution: pure functions, no cgroups."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.apis.config import load_config
from agent.container.downwardapi import ContainerConfigError, HostInfo, expand
from agent.kuberuntime.envvars import container_env
from agent.lifecycle.admission import admit
from kubenode.model import Container, EnvVar, Pod, ValidationError


def test_config_file_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("nodeName: n1\nmanifests: /srv/m\nmaxPods: 5\ndevicePluginDir: ''\n")
    config = load_config(path)
    assert (config.node_name, str(config.manifests), config.max_pods, config.device_plugin_dir) == (
        "n1",
        "/srv/m",
        5,
        None,
    )
    path.write_text("maxPod: 5\n")
    with pytest.raises(ValidationError) as err:
        load_config(path)
    assert err.value.source == str(path) and err.value.field == "maxPod"
    path.write_text("cgroupDriver: runc\n")
    with pytest.raises(ValidationError, match="cgroupDriver: must be cgroupfs or systemd"):
        load_config(path)
    path.write_text("listen: nowhere\n")
    with pytest.raises(ValidationError, match="listen: must be HOST:PORT"):
        load_config(path)


def pod(name: str, **requests: int) -> Pod:
    return Pod(name=name, uid=name, containers=(Container("c", requests=dict(requests)),))


def test_admission_counts_pods_cpu_memory_and_extended_resources() -> None:
    allocatable = {"cpu": 2000, "memory": 1000, "pods": 2, "example.com/gpu": 1}
    active = [pod("a", cpu=1500, memory=400), pod("b", **{"example.com/gpu": 1})]
    assert admit(pod("c"), active, allocatable).reason == "OutOfpods"  # type: ignore[union-attr]
    allocatable["pods"] = 10
    assert admit(pod("c", cpu=500, memory=600), active, allocatable) is None
    assert admit(pod("c", cpu=501), active, allocatable).reason == "OutOfcpu"  # type: ignore[union-attr]
    assert admit(pod("c", memory=601), active, allocatable).reason == "OutOfmemory"  # type: ignore[union-attr]
    gpu = admit(pod("c", **{"example.com/gpu": 1}), active, allocatable)
    assert gpu is not None and gpu.reason == "OutOfexample.com/gpu"
    assert "requested: 1, used: 1, capacity: 1" in gpu.message


def test_env_resolution() -> None:
    host = HostInfo("node-1", allocatable={"cpu": 4000, "memory": 2**30})
    c = Container(
        "app",
        limits={"memory": 64 * 2**20},
        env=(
            EnvVar("A", "x"),
            EnvVar("B", "$(A)-$(MISSING)-$$(A)"),
            EnvVar("UID", field_path="metadata.uid"),
            EnvVar("IP", field_path="status.podIP"),
            EnvVar("MEM_MI", resource_field=("", "limits.memory", "1Mi")),
            EnvVar("CPUS", resource_field=("", "limits.cpu", "1")),  # unset limit: node allocatable
            EnvVar("SERIAL", "mine"),
        ),
    )
    p = Pod(name="p", uid="u-1", containers=(c,))
    env = container_env(p, c, host, {"SERIAL": "from-plugin", "KUBENODE_CPUSET": "1"})
    assert env["B"] == "x-$(MISSING)-$(A)"
    assert (env["UID"], env["IP"], env["MEM_MI"], env["CPUS"]) == ("u-1", "127.0.0.1", "64", "4")
    assert env["SERIAL"] == "mine" and env["KUBENODE_CPUSET"] == "1"  # the container's own env wins
    assert env["HOSTNAME"] == "p" and "/usr/bin" in env["PATH"]
    assert expand("$(A)$(A)", {"A": "1"}) == "11"
    bad = Container("app", env=(EnvVar("X", field_path="spec.serviceAccount.token"),))
    with pytest.raises(ContainerConfigError, match="container app env X: unsupported fieldRef"):
        container_env(Pod(name="p", uid="u", containers=(bad,)), bad, host)
