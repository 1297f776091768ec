"""The device plugin under the real kubelet: `kubenode deviceplugin` (the cpu backend, pinning through CDI,
and a static "GPU") registers on kubelet v1.37's device manager, its resources reach the Node, a pod asking
`kubenode.io/cpu: 1` runs under containerd 2.4 pinned to exactly the CPU the kubelet allocated, and the
plugin and the kubelet survive each other's restarts. The tests share one node (module fixture) and run in
order: each builds on the state the one before left.

Harness: harness/k8s/controlplane.py (the API server, scheduler, controller manager),
harness/k8s/containerd2.py and harness/k8s/kubelet.py (the node). Nothing here dials anything but loopback;
pods use host networking.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.k8s.containerd2 import Containerd2
from harness.k8s.images import BUSYBOX_IMAGE
from harness.k8s.kubelet import (
    Kubelet,
    container_id,
    cpus_allowed_list,
    metric_sum,
    pid_env,
    pod_phase,
    wait_pod_running,
)
from harness.k8s.process import ManagedProcess

ROOT = Path(__file__).resolve().parents[2]
KUBENODE = ROOT / ".venv" / "bin" / "kubenode"
NODE = "kn-dp-node"
NAMESPACE = "default"
CPU = "kubenode.io/cpu"
GPU = "kubenode.io/gpu"
GPUS = ("kn-gpu-0", "kn-gpu-1")


def plugin_config(cdi_dir: Path, pod_resources: Path, health_file: Path) -> str:
    return json.dumps(
        {
            "version": "v1",
            "resources": [
                {
                    "name": CPU,
                    "backend": "cpu",
                    "cpu": {
                        "unit": "thread",
                        "reserved": "",
                        "cdi": True,
                        "cdiSpecDir": str(cdi_dir),
                        "podResourcesSocket": str(pod_resources),
                        "cdiPruneSeconds": 0.5,  # pruning runs through the kubelet restart below
                    },
                },
                {
                    "name": GPU,
                    "backend": "static",
                    "static": {
                        "healthFile": str(health_file),
                        "devices": [
                            {
                                "id": gpu,
                                "numa": 0,
                                "deviceNodes": [
                                    {
                                        "hostPath": "/dev/null",
                                        "containerPath": f"/dev/{gpu}",
                                        "permissions": "rw",
                                    }
                                ],
                                "env": {"KN_GPU_SERIAL": gpu},
                            }
                            for gpu in GPUS
                        ],
                    },
                },
            ],
        }
    )


def pinned_pod(name: str, resources: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "hostNetwork": True,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "grep Cpus_allowed_list /proc/self/status; exec sleep 3600"],
                    "resources": {"limits": resources, "requests": resources},
                }
            ],
        },
    }


@dataclass
class Node:
    control_plane: Any
    containerd: Containerd2
    kubelet: Kubelet
    plugin: ManagedProcess
    health_file: Path
    times: dict[str, float]

    def node_resources(self) -> tuple[dict[str, str], dict[str, str]]:
        node = self.kubelet.node() or {}
        status = node.get("status", {})
        return status.get("capacity") or {}, status.get("allocatable") or {}

    def wait(self, condition: Callable[[], Any], timeout: float, what: str) -> float:
        started = time.monotonic()
        while True:
            try:
                if condition():
                    return time.monotonic() - started
            except Exception:
                pass
            if time.monotonic() - started > timeout:
                raise AssertionError(
                    f"{what}: not within {timeout:.0f} s\n--- kubelet ---\n{self.kubelet.log_tail(40)}\n"
                    f"--- plugin ---\n{self.plugin.log_tail(40)}"
                )
            time.sleep(0.2)


@pytest.fixture(scope="module")
def node(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    work = tmp_path_factory.mktemp("dp-under-kubelet")
    health_file = work / "gpu-health"
    health_file.write_text("")
    times: dict[str, float] = {}
    with Containerd2() as containerd:
        kubelet = Kubelet(control_plane, containerd, NODE)
        plugin: ManagedProcess | None = None
        try:
            times["kubelet_ready"] = kubelet.start()
            config = work / "deviceplugin.yaml"
            config.write_text(plugin_config(containerd.cdi_dir, kubelet.pod_resources_socket, health_file))
            plugin = ManagedProcess(
                "deviceplugin",
                [KUBENODE, "deviceplugin", "--config", config,
                 "--kubelet-dir", kubelet.device_plugin_dir],
                work,
            )  # fmt: skip
            plugin.start()
            yield Node(control_plane, containerd, kubelet, plugin, health_file, times)
        finally:
            for name in ("pinned", "gpu", "pair"):
                control_plane.api(
                    "DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", {"gracePeriodSeconds": 0}
                )
            if plugin is not None:
                plugin.stop()
            control_plane.wait_pods_gone(NODE)
            control_plane.api("DELETE", f"/api/v1/nodes/{NODE}")
            kubelet.close()
            print(f"device plugin under kubelet: {json.dumps(times)}", file=sys.stderr)


def test_plugin_registers_and_node_shows_devices(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    seconds = node.wait(
        lambda: node.node_resources()[1].get(CPU) == "2" and node.node_resources()[1].get(GPU) == "2",
        60,
        "kubenode.io/cpu and kubenode.io/gpu on the Node's allocatable",
    )
    node.times["resources_on_node"] = seconds
    record_property("resources_on_node_s", node.times["resources_on_node"])
    capacity, allocatable = node.node_resources()
    assert (capacity[CPU], capacity[GPU]) == ("2", "2")
    assert (allocatable[CPU], allocatable[GPU]) == ("2", "2")
    assert (node.kubelet.device_plugin_dir / "kubelet.sock").exists()
    allocatable_devices = node.kubelet.pod_resources_allocatable().get("devices") or []
    by_resource = {d["resourceName"]: sorted(d["deviceIds"]) for d in allocatable_devices}
    assert by_resource.get(CPU) and by_resource.get(GPU), allocatable_devices


def test_pinned_pod_runs_on_the_allocated_cpu(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    cp = node.control_plane
    status, body = cp.api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pinned_pod("pinned", {CPU: "1"}))
    assert status == 201, body
    pod, seconds = wait_pod_running(cp, NAMESPACE, "pinned", timeout=120)
    node.times["pinned_pod_running"] = seconds
    record_property("time_to_running_s", node.times["pinned_pod_running"])
    pid = node.containerd.container_pid(container_id(pod, "main"))
    # containerd 2.4 ran it with its own shim and runc 1.5, never Debian's (PATH has them first anyway).
    shims = node.containerd.shims()
    assert shims and {Path(s.exe()) for s in shims} == {node.containerd.shim_path}, shims
    assert container_id(pod, "main") in node.containerd.runc_list()
    runtime = json.loads(node.containerd.crictl("info"))["config"]["containerd"]["runtimes"]["runc"]
    assert (runtime["runtimePath"], runtime["options"]["BinaryName"]) == (
        str(node.containerd.shim_path),
        str(node.containerd.runc_path),
    )

    listed = node.kubelet.pod_resources_list()
    devices = _pod_devices(listed, "pinned")
    assert list(devices) == [CPU], listed
    (allocated,) = devices[CPU]
    cpu = allocated.removeprefix("cpu")
    assert cpus_allowed_list(pid) == cpu, (allocated, cpus_allowed_list(pid))
    assert pid_env(pid).get("KUBENODE_CPUSET") == cpu  # the CDI spec's env edit reached the process

    entries = [
        e
        for e in node.kubelet.checkpoint()["Data"]["PodDeviceEntries"]
        if e["PodUID"] == pod["metadata"]["uid"] and e["ResourceName"] == CPU
    ]
    assert len(entries) == 1, entries
    assert [i for ids in entries[0]["DeviceIDs"].values() for i in ids] == [allocated]
    assert f"kubenode.io/cpuset={cpu}".encode() in entries[0]["AllocRespBytes"]
    assert re.search(r"Issuing a GetPreferredAllocation call.*kubenode\.io/cpu", node.kubelet.logs()), (
        "the kubelet did not call GetPreferredAllocation"
    )
    metrics = node.kubelet.metrics()
    assert metric_sum(metrics, "kubelet_device_plugin_alloc_duration_seconds_count", resource_name=CPU) >= 1
    assert metric_sum(metrics, "kubelet_device_plugin_registration_total", resource_name=CPU) >= 1
    # The CDI spec the plugin wrote is in containerd's (and only containerd's) spec dir.
    spec = node.containerd.cdi_dir / "kubenode-cpuset_kubenode.io_cpu.json"
    assert spec.exists(), sorted(os.listdir(node.containerd.cdi_dir))


def test_gpu_pod_gets_its_device_node_and_env(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    """The static backend's Allocate (a DeviceSpec, an env) as the real kubelet passes it to containerd."""
    cp = node.control_plane
    status, body = cp.api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pinned_pod("gpu", {GPU: "1"}))
    assert status == 201, body
    pod, seconds = wait_pod_running(cp, NAMESPACE, "gpu", timeout=120)
    record_property("gpu_time_to_running_s", seconds)
    (gpu,) = _pod_devices(node.kubelet.pod_resources_list(), "gpu")[GPU]
    pid = node.containerd.container_pid(container_id(pod, "main"))
    assert pid_env(pid).get("KN_GPU_SERIAL") == gpu
    device = os.stat(f"/proc/{pid}/root/dev/{gpu}")
    assert stat.S_ISCHR(device.st_mode) and (os.major(device.st_rdev), os.minor(device.st_rdev)) == (1, 3)
    assert not any(os.path.exists(f"/proc/{pid}/root/dev/{other}") for other in GPUS if other != gpu)
    status, body = cp.api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/gpu", {"gracePeriodSeconds": 0})
    assert status == 200, body
    node.wait(lambda: pod_phase(cp, NAMESPACE, "gpu") is None, 60, "the GPU pod gone")


def test_kubelet_restart_plugin_registers_again_and_pod_keeps_its_core(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    pod_before = pod_phase(node.control_plane, NAMESPACE, "pinned")
    assert pod_before is not None
    before = _pod_devices(node.kubelet.pod_resources_list(), "pinned")[CPU]
    pid = node.containerd.container_pid(container_id(pod_before, "main"))
    socket_id = _identity(node.kubelet.device_plugin_dir / "kubelet.sock")
    log_mark = len(node.kubelet.logs())

    node.times["kubelet_restart_healthy"] = node.kubelet.restart()
    record_property("kubelet_restart_healthy_s", node.times["kubelet_restart_healthy"])
    node.wait(
        lambda: _identity(node.kubelet.device_plugin_dir / "kubelet.sock") != socket_id,
        60,
        "the restarted kubelet's new kubelet.sock",
    )

    def registered_again() -> bool:
        new_log = node.kubelet.logs()[log_mark:]
        return all(_kubelet_registered(new_log, name) for name in (CPU, GPU))

    node.times["plugin_registered_again"] = node.wait(registered_again, 60, "the plugin registered again")
    record_property("plugin_registered_again_s", node.times["plugin_registered_again"])
    node.wait(lambda: node.node_resources()[1].get(CPU) == "2", 60, "kubenode.io/cpu allocatable again")
    after_pod = pod_phase(node.control_plane, NAMESPACE, "pinned")
    assert after_pod is not None
    assert after_pod["status"]["phase"] == "Running"
    assert after_pod["status"]["containerStatuses"][0]["restartCount"] == 0
    node.wait(
        lambda: _pod_devices(node.kubelet.pod_resources_list(), "pinned").get(CPU) == before,
        60,
        "the pod's core in PodResources after the restart",
    )
    assert cpus_allowed_list(pid) == before[0].removeprefix("cpu")
    assert "register failed" not in node.plugin.log(), node.plugin.log_tail(20)  # one Register per kubelet
    # The plugin prunes every 0.5 s, and the restarted kubelet answered PodResources List with no pod for
    # about a second: the running pod's CDI entry is still there (a restart of its container needs it).
    time.sleep(1.5)
    spec = json.loads((node.containerd.cdi_dir / "kubenode-cpuset_kubenode.io_cpu.json").read_text())
    assert before[0].removeprefix("cpu") in [d["name"] for d in spec["devices"]], spec


def test_plugin_restart_kubelet_sees_it_again(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    log_mark = len(node.kubelet.logs())
    node.plugin.stop()
    # The kubelet marks a plugin's devices unhealthy when its endpoint goes away.
    node.wait(lambda: node.node_resources()[1].get(GPU) == "0", 60, "kubenode.io/gpu leaves allocatable")
    node.plugin.start()
    node.times["plugin_restart_seen"] = node.wait(
        lambda: node.node_resources()[1].get(GPU) == "2" and node.node_resources()[1].get(CPU) == "2",
        60,
        "kubenode.io/gpu allocatable again after the plugin restart",
    )
    record_property("plugin_restart_seen_s", node.times["plugin_restart_seen"])
    assert all(_kubelet_registered(node.kubelet.logs()[log_mark:], name) for name in (CPU, GPU))
    pod = pod_phase(node.control_plane, NAMESPACE, "pinned")
    assert pod is not None and pod["status"]["phase"] == "Running"


def test_unhealthy_device_leaves_allocatable(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    node.health_file.write_text(f"{GPUS[1]}\n")
    node.times["unhealthy_leaves_allocatable"] = node.wait(
        lambda: node.node_resources()[1].get(GPU) == "1", 60, "an unhealthy GPU leaves allocatable"
    )
    record_property("unhealthy_leaves_allocatable_s", node.times["unhealthy_leaves_allocatable"])
    capacity, _ = node.node_resources()
    assert capacity[GPU] == "2"  # still the device's, only not allocatable
    node.health_file.write_text("")
    node.wait(lambda: node.node_resources()[1].get(GPU) == "2", 60, "the GPU healthy again")


def _pod_devices(listed: dict[str, Any], pod: str) -> dict[str, list[str]]:
    for entry in listed.get("podResources") or []:
        if entry["name"] == pod and entry["namespace"] == NAMESPACE:
            out: dict[str, list[str]] = {}
            for container in entry.get("containers") or []:
                for device in container.get("devices") or []:
                    out.setdefault(device["resourceName"], []).extend(device["deviceIds"])
            return out
    raise AssertionError(f"pod {pod} not in PodResources List: {listed}")


def _kubelet_registered(log: str, resource: str) -> bool:
    """The kubelet's device manager took a Register of `resource` and connected to its endpoint."""
    return (
        f'"Got registration request from device plugin with resource" resourceName="{resource}"' in log
        and f'"Device plugin connected" resourceName="{resource}"' in log
    )


def _identity(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_ctime_ns


def _allocatable_devices(kubelet: Kubelet) -> dict[str, list[str]]:
    devices = kubelet.pod_resources_allocatable().get("devices") or []
    return {d["resourceName"]: d["deviceIds"] for d in devices}


def test_freed_cpu_set_is_pruned_from_the_cdi_spec(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    """The plugin's pruner asks the real kubelet's PodResources List which sets are still held: once the
    pinned pod is gone its entry, the file's last, goes and the file with it (CDI calls a spec without
    devices invalid)."""
    spec = node.containerd.cdi_dir / "kubenode-cpuset_kubenode.io_cpu.json"
    assert spec.exists()
    cp = node.control_plane
    status, body = cp.api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/pinned", {"gracePeriodSeconds": 0})
    assert status == 200, body
    started = time.monotonic()
    node.wait(lambda: not spec.exists(), 60, "the freed set's CDI entry pruned")
    record_property("pod_deleted_to_pruned_s", time.monotonic() - started)


def test_two_containers_each_pinned_to_its_own_cpu(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    """One pod, two containers asking kubenode.io/cpu: 1 each: the kubelet allocates per container, and
    each container runs on exactly its own CPU (two entries in the plugin's CDI spec, one hook each)."""
    cp = node.control_plane
    pod = pinned_pod("pair", {CPU: "1"})
    second = json.loads(json.dumps(pod["spec"]["containers"][0]))
    second["name"] = "second"
    pod["spec"]["containers"].append(second)
    status, body = cp.api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
    assert status == 201, body
    running, seconds = wait_pod_running(cp, NAMESPACE, "pair", timeout=120)
    record_property("two_containers_time_to_running_s", seconds)
    listed = node.kubelet.pod_resources_list()
    entry = next(p for p in listed["podResources"] if p["name"] == "pair")
    held = {
        c["name"]: [i for d in c.get("devices") or [] if d["resourceName"] == CPU for i in d["deviceIds"]]
        for c in entry["containers"]
    }
    assert sorted(held) == ["main", "second"] and sorted(held["main"] + held["second"]) == ["cpu0", "cpu1"]
    for name, (device,) in held.items():
        pid = node.containerd.container_pid(container_id(running, name))
        assert cpus_allowed_list(pid) == device.removeprefix("cpu"), name
    status, body = cp.api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/pair", {"gracePeriodSeconds": 0})
    assert status == 200, body
    node.wait(lambda: pod_phase(cp, NAMESPACE, "pair") is None, 60, "the pair pod gone")
