"""Someone else's driver under our agent: kubernetes-sigs' dra-example-driver v0.4.0
(`dra-example-kubeletplugin`, Go, built by `make k8s`, mock GPUs) runs as a host process against the real
kube-apiserver v1.37.2 with the node's `system:node:<name>` identity, its plugin and registration
directories pointed at our agent's, and its CDI root the agent's CDI directory.

It registers with the agent's plugin watcher and publishes its ResourceSlice (driver gpu.example.com); a
pod asking one of its GPUs through a ResourceClaimTemplate (DeviceClass gpu.example.com, written here) gets
its claim from the real kube-controller-manager, allocated by the real kube-scheduler; the agent calls the
driver's NodePrepareResources and runs the process pod with the driver's CDI edits applied: its env has
`GPU_DEVICE_<n>=gpu-<n>` for exactly the allocated device. Deleting the pod unprepares the claim (the
driver removes its claim's CDI spec) and the claim is deleted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.k8s.agentnode import AgentNode, wait_for
from harness.k8s.binaries import binary
from harness.k8s.controlplane import ControlPlane
from harness.k8s.process import ManagedProcess

SCENARIO = "Someone else's driver under our agent"
COMPONENTS = (
    "dra-example-kubeletplugin",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "etcd",
)
NAMESPACE = "example-driver-interop"
DRIVER = "gpu.example.com"
DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": DRIVER},
    "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-example-gpu", "namespace": NAMESPACE},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}},
}


@pytest.fixture(scope="module")
def node(control_plane: ControlPlane) -> Iterator[AgentNode]:
    with AgentNode(control_plane, NAMESPACE) as node:
        yield node


def start_example_driver(node: AgentNode) -> ManagedProcess:
    proc = ManagedProcess(
        "dra-example-kubeletplugin",
        [binary("dra-example-kubeletplugin"),
         "--kubeconfig", str(node.kubeconfig),
         "--node-name", node.name,
         "--cdi-root", str(node.agent.dir / "cdi"),
         "--kubelet-plugins-directory-path", str(node.agent.dir / "plugins"),
         "--kubelet-registrar-directory-path", str(node.agent.dir / "plugins_registry"),
         "--num-devices", "4"],
        node.agent.dir / "logs",
    )  # fmt: skip
    node.extra.append(proc)
    proc.start()
    return proc


def test_the_example_driver_registers_publishes_and_its_gpu_reaches_a_pod(
    node: AgentNode, record_property: Callable[[str, object], None]
) -> None:
    cp = node.cp
    started = time.monotonic()
    driver = start_example_driver(node)
    wait_for(lambda: f"DRA driver {DRIVER} registered" in node.agent.log(), 60,
             lambda: f"the driver registered\n{driver.log_tail()}\n{node.agent.log()[-2000:]}")  # fmt: skip
    record_property("driver_registered_s", time.monotonic() - started)
    selector = f"spec.nodeName={node.name}"

    def slices() -> list[dict[str, Any]] | None:
        items = node.get(f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector={selector}")["items"]
        return [s for s in items if s["spec"]["driver"] == DRIVER] or None

    [published] = wait_for(slices, 30, lambda: f"the example driver's ResourceSlice\n{driver.log_tail()}")
    devices = sorted(d["name"] for d in published["spec"]["devices"])
    assert devices == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"], devices
    cp.apply(json.dumps(DEVICE_CLASS))
    cp.apply(json.dumps(TEMPLATE))

    script = "env | grep -E '^(GPU_DEVICE|DRA_)' | sort; exec sleep 600"
    created = time.monotonic()
    status, answer = cp.api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "example-gpu", "namespace": NAMESPACE},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node.name},
            "terminationGracePeriodSeconds": 5,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-example-gpu"}],
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script],
                            "resources": {"claims": [{"name": "gpu"}]}}],
        },
    })  # fmt: skip
    assert status == 201, answer
    try:
        running = node.wait_running("example-gpu", 90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- driver ---\n{driver.log_tail(40)}") from None
    record_property("time_to_running_s", time.monotonic() - created)

    [claim_name] = [s["resourceClaimName"] for s in running["status"]["resourceClaimStatuses"]]
    claim = node.get(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/{claim_name}")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == (DRIVER, node.name), result
    device = result["device"]
    index = device.removeprefix("gpu-")
    out = wait_for(lambda: node.kubectl("logs", "example-gpu").stdout, 20, "the pod's log")
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    # The driver's CDI edits (its claim spec and its common spec) reached the container's environment.
    assert env.get(f"GPU_DEVICE_{index}") == device, out
    assert env.get("DRA_RESOURCE_DRIVER_NAME") == DRIVER, out
    assert [k for k in env if k.startswith("GPU_DEVICE_") and k.count("_") == 2] == [f"GPU_DEVICE_{index}"], (
        out
    )
    uid = claim["metadata"]["uid"]
    cdi = node.agent.dir / "cdi"
    assert any(uid in p.name for p in cdi.iterdir()), list(cdi.iterdir())

    node.delete_pod("example-gpu")
    wait_for(lambda: not any(uid in p.name for p in cdi.iterdir()), 30,
             lambda: f"the claim's CDI spec removed (unprepared)\n{driver.log_tail()}")  # fmt: skip
    wait_for(lambda: cp.api("GET", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/"
                                   f"{claim_name}")[0] == 404, 30, "the claim deleted")  # fmt: skip
    assert "NodeUnprepareResources" in driver.log() or "Unpreparing" in driver.log(), driver.log_tail()
