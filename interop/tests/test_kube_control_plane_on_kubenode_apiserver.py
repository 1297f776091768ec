"""The real kube-scheduler v1.37 with `kubenode apiserver` as its only API server (harness/k8s/
kubecomponents_on_kubenode.py): its defaults (protobuf bodies, leader election through a Lease), its
bootstrap RBAC as the user system:kube-scheduler.

- it syncs every informer (no list or watch fails: each kind it informs on is served and allowed) and takes
  kube-system/kube-scheduler;
- it binds a pod asking `kubenode.io/cpu` to the Node whose allocatable has it, and leaves a pod asking more
  than any node has Unschedulable ("Insufficient kubenode.io/cpu");
- it respects a NoSchedule taint (a pod without the toleration goes to the other node);
- it allocates a DRA claim from a hand-written ResourceSlice (CEL selector on a capacity) and binds the pod to
  that slice's node, writing the claim's allocation and reservedFor.

Nodes are plain objects (no agent): what the scheduler reads is their allocatable, labels and taints.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.k8s.kubecomponents_on_kubenode import KubeControlPlaneOnKubenode

SCENARIO = "real kube-scheduler on kubenode apiserver"
COMPONENTS = ("kube-scheduler", "kubenode apiserver")
RESOURCE = "/apis/resource.k8s.io/v1"
PODS = "/api/v1/namespaces/default/pods"
NOW = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def plane() -> Iterator[KubeControlPlaneOnKubenode]:
    with KubeControlPlaneOnKubenode(scheduler=True) as plane:
        yield plane


def node(name: str, cpus: int, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110", "kubenode.io/cpu": str(cpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "interop": "kube-scheduler"}},
        "spec": {"taints": taints or []},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
                            "lastHeartbeatTime": NOW, "lastTransitionTime": NOW}],
        },
    }  # fmt: skip


def create_node(plane: KubeControlPlaneOnKubenode, body: dict[str, Any]) -> None:
    status, created = plane.request("POST", "/api/v1/nodes", body)
    assert status == 201, created
    created["status"] = body["status"]  # a create keeps no status: write it as the kubelet would
    status, reply = plane.request("PUT", f"/api/v1/nodes/{body['metadata']['name']}/status", created)
    assert status == 200, reply


def pod(name: str, cpus: int = 0, claim: str = "", nodes: tuple[str, ...] = ()) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    spec: dict[str, Any] = {"containers": [container]}
    if cpus:
        container["resources"] = {
            "requests": {"kubenode.io/cpu": str(cpus)},
            "limits": {"kubenode.io/cpu": str(cpus)},
        }
    if claim:
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimName": claim}]
        container["resources"] = {"claims": [{"name": "dev"}]}
    if nodes:
        term = {
            "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]
        }
        required = {"nodeSelectorTerms": [term]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def wait_pod(
    plane: KubeControlPlaneOnKubenode, name: str, done: Any, timeout: float = 30.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    current: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status, current = plane.request("GET", f"{PODS}/{name}")
        if status == 200 and done(current):
            return current
        time.sleep(0.2)
    raise AssertionError(f"pod {name} not as expected within {timeout} s: {current}\n{plane.logs()}")


def bound(obj: dict[str, Any]) -> bool:
    return bool(obj["spec"].get("nodeName"))


def unschedulable(obj: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in obj.get("status", {}).get("conditions") or []
    )


def test_kube_scheduler_syncs_its_informers_and_takes_its_lease(
    plane: KubeControlPlaneOnKubenode, record_property: Any
) -> None:
    holder = plane.wait_for_lease("kube-scheduler")
    assert holder.startswith(("127.0.0.1", "localhost")) or "_" in holder, holder
    assert plane.scheduler is not None
    log = plane.scheduler.log()
    failures = [
        line for line in log.splitlines() if re.search(r"Failed to watch|failed to list|forbidden", line)
    ]
    assert not failures, "\n".join(failures[:20])
    assert "Successfully acquired lease" in log
    record_property("scheduler_start_s", round(plane.start_seconds["kube-scheduler"], 2))


def test_kube_scheduler_binds_by_kubenode_cpu(plane: KubeControlPlaneOnKubenode) -> None:
    create_node(plane, node("cpu-small", 1))
    create_node(plane, node("cpu-big", 4))
    only = ("cpu-small", "cpu-big")
    assert plane.request("POST", PODS, pod("wants-three", cpus=3, nodes=only))[0] == 201
    placed = wait_pod(plane, "wants-three", bound)
    assert placed["spec"]["nodeName"] == "cpu-big"
    scheduled = next(c for c in placed["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["status"] == "True"
    assert plane.request("POST", PODS, pod("wants-eight", cpus=8, nodes=only))[0] == 201
    waiting = wait_pod(plane, "wants-eight", unschedulable)
    message = next(c["message"] for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "Insufficient kubenode.io/cpu" in message, message
    _, events = plane.request("GET", "/api/v1/namespaces/default/events")
    reasons = {(e["involvedObject"]["name"], e["reason"]) for e in events["items"]}
    assert ("wants-three", "Scheduled") in reasons and ("wants-eight", "FailedScheduling") in reasons, reasons


def test_kube_scheduler_respects_taints(plane: KubeControlPlaneOnKubenode) -> None:
    taint = {"key": "kubenode.io/dedicated", "value": "gpu", "effect": "NoSchedule"}
    create_node(plane, node("tainted", 8, [taint]))
    create_node(plane, node("plain", 1))
    assert plane.request("POST", PODS, pod("no-toleration", cpus=1, nodes=("tainted", "plain")))[0] == 201
    assert wait_pod(plane, "no-toleration", bound)["spec"]["nodeName"] == "plain"
    tolerating = pod("tolerates", cpus=2, nodes=("tainted", "plain"))
    tolerating["spec"]["tolerations"] = [{"key": "kubenode.io/dedicated", "operator": "Equal", "value": "gpu",
                                          "effect": "NoSchedule"}]  # fmt: skip
    assert plane.request("POST", PODS, tolerating)[0] == 201
    assert wait_pod(plane, "tolerates", bound)["spec"]["nodeName"] == "tainted"


def test_kube_scheduler_allocates_a_dra_claim(plane: KubeControlPlaneOnKubenode) -> None:
    create_node(plane, node("dra-a", 1))
    create_node(plane, node("dra-b", 1))
    device_class = {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.kubenode.io"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.kubenode.io'"}}]},
    }  # fmt: skip
    assert plane.request("POST", f"{RESOURCE}/deviceclasses", device_class)[0] == 201
    for name, memory in (("dra-a", "8Gi"), ("dra-b", "40Gi")):
        slice_ = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpus"},
            "spec": {"driver": "gpu.kubenode.io", "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "fake"}},
                                  "capacity": {"memory": {"value": memory}}}]},
        }  # fmt: skip
        assert plane.request("POST", f"{RESOURCE}/resourceslices", slice_)[0] == 201
    selector = "device.capacity['gpu.kubenode.io'].memory.compareTo(quantity('20Gi')) >= 0"
    exactly = {"deviceClassName": "gpu.kubenode.io", "selectors": [{"cel": {"expression": selector}}]}
    claim = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "big-gpu"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }  # fmt: skip
    assert plane.request("POST", f"{RESOURCE}/namespaces/default/resourceclaims", claim)[0] == 201
    assert plane.request("POST", PODS, pod("uses-gpu", claim="big-gpu", nodes=("dra-a", "dra-b")))[0] == 201
    placed = wait_pod(plane, "uses-gpu", bound)
    assert placed["spec"]["nodeName"] == "dra-b"
    _, allocated = plane.request("GET", f"{RESOURCE}/namespaces/default/resourceclaims/big-gpu")
    results = allocated["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [("gpu.kubenode.io", "dra-b", "gpu-0")]
    assert [r["name"] for r in allocated["status"]["reservedFor"]] == ["uses-gpu"]
    assert "resource.kubernetes.io/delete-protection" in allocated["metadata"]["finalizers"]
