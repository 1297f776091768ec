"""The whole path for a GPU pod: device plugin -> agent -> Node allocatable -> scheduler -> agent -> cgroup.

Two real agents join a real `kubenode apiserver`: one with the static device plugin advertising
two `kubenode.io/gpu` devices, one without. A pod asking for a GPU, created without a node, is
placed by the live scheduler on the GPU node, where the agent runs it in its pod cgroup with the
device the plugin allocated (its env var reaches the container). A pod asking for more GPUs than
are left gets FailedScheduling naming kubenode.io/gpu.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.agent import REPO, AgentProcess
from kubenode.cgroupsweep import V1_MOUNT
from kubenode.kubeclient import NODES, PODS, KubeClient, load_kubeconfig
from scheduler.profile import Configuration
from scheduler.runner import LiveScheduler, RunOptions
from tests.agent.support import require_cgroup_v1
from tests.agent_cluster.support import events_for, phase_is, pod_body
from tests.scheduler_live.support import check_no_overcommit, wait_for

GPU = "kubenode.io/gpu"


class GpuAgent(AgentProcess):
    """An agent whose device plugin advertises two static kubenode.io/gpu devices."""

    def start_plugin(self) -> None:
        config = self.dir / "gpu-plugin.yaml"
        devices = [
            {"id": f"gpu-{i}", "deviceNodes": [{"hostPath": "/dev/null", "containerPath": f"/dev/gpu{i}"}],
             "env": {"KUBENODE_TEST_GPU": f"gpu-{i}"}}
            for i in range(2)
        ]  # fmt: skip
        resource = {"name": GPU, "backend": "static", "static": {"devices": devices}}
        config.write_text(yaml.safe_dump({"version": "v1", "resources": [resource]}))
        self.plugin = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "deviceplugin", "--config", str(config),
             "--kubelet-dir", str(self.plugin_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.env(),
            cwd=REPO,
        )  # fmt: skip


@pytest.fixture
def agents(apiserver: Any) -> Iterator[tuple[AgentProcess, AgentProcess]]:
    require_cgroup_v1()
    gpu = GpuAgent(apiserver.kubeconfig, plugin=True)
    cpu = AgentProcess(apiserver.kubeconfig)
    for agent in (gpu, cpu):
        agent.kubeconfig = apiserver.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
    try:
        gpu.start()
        cpu.start()
        yield gpu, cpu
    finally:
        leftovers = gpu.close() + cpu.close()
        assert not leftovers, f"cgroups left behind: {leftovers}"


def test_a_gpu_pod_lands_on_the_gpu_node_and_runs_with_its_device(
    apiserver: Any, admin: KubeClient, agents: tuple[AgentProcess, AgentProcess], tmp_path: Path
) -> None:
    gpu, cpu = agents

    def gpus_advertised() -> bool:
        allocatable = (admin.get(NODES, gpu.node).get("status") or {}).get("allocatable") or {}
        return allocatable.get(GPU) == "2"

    wait_for(gpus_advertised, 30, "the GPU node to advertise 2 kubenode.io/gpu")
    wait_for(lambda: admin.get(NODES, cpu.node).get("status", {}).get("allocatable"), 30, "the CPU node")
    scheduler = LiveScheduler(load_kubeconfig(apiserver.kubeconfig), RunOptions(Configuration()))
    scheduler.start()
    try:
        seen = tmp_path / "gpu-env"
        os.chmod(tmp_path, 0o777)
        body = pod_body(
            "train",
            "",
            f"echo $KUBENODE_TEST_GPU > {seen}; sleep 600",
            resources={"limits": {"cpu": "100m", "memory": "32Mi", GPU: "1"}},
            grace=1,
        )
        del body["spec"]["nodeName"]
        uid = admin.create(PODS, body, "default")["metadata"]["uid"]
        wait_for(lambda: phase_is(admin, "train", "Running"), 40, "the GPU pod Running")
        placed = admin.get(PODS, "train", "default")
        assert placed["spec"]["nodeName"] == gpu.node
        device = wait_for(lambda: seen.exists() and seen.read_text().strip(), 10, "the container's GPU env")
        assert device in ("gpu-0", "gpu-1")
        pod_cgroups = [d for d, _, _ in os.walk(V1_MOUNT / "cpu" / gpu.root.strip("/")) if d.endswith(uid)]
        assert pod_cgroups, "the pod has no cgroup on the GPU node"
        # One GPU is left: a pod asking for two cannot be placed anywhere.
        greedy = pod_body("greedy", "", resources={"limits": {"cpu": "100m", "memory": "32Mi", GPU: "2"}})
        del greedy["spec"]["nodeName"]
        admin.create(PODS, greedy, "default")
        failed = wait_for(lambda: events_for(admin, "greedy", "FailedScheduling"), 15, "FailedScheduling")
        assert f"Insufficient {GPU}" in failed[0]["message"]
        check_no_overcommit(admin)
        for name in ("train", "greedy"):
            admin.delete(PODS, name, "default")
    finally:
        scheduler.stop()
