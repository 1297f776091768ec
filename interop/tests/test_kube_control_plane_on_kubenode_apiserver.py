"""The real kube-scheduler and kube-controller-manager v1.37 with `kubenode apiserver` as their only API
server (harness/k8s/kubecomponents_on_kubenode.py): their defaults (protobuf bodies, leader election through
Leases, every controller of `--controllers=*`), their bootstrap RBAC as the users system:kube-scheduler and
system:kube-controller-manager.

- it syncs every informer (no list or watch fails: each kind it informs on is served and allowed) and takes
  kube-system/kube-scheduler;
- it binds a pod asking `kubenode.io/cpu` (or `kubenode.io/gpu`) to the Node whose allocatable has it, and
  leaves a pod asking more than any node has Unschedulable ("Insufficient kubenode.io/cpu");
- it respects a NoSchedule taint (a pod without the toleration goes to the other node);
- it preempts a lower-priority pod for one of a PriorityClass (Priority admission gives the pod its value),
  marking the victim DisruptionTarget and nominating the node, and binds it once the victim is gone;
- it allocates a DRA claim from a hand-written ResourceSlice (CEL selector on a capacity) and binds the pod to
  that slice's node, writing the claim's allocation and reservedFor.

- kube-controller-manager syncs every informer (the garbage collector's metadata informers of every served
  kind included), takes kube-system/kube-controller-manager, rolls a Deployment out to its available replicas
  (the test plays the kubelet: it marks the bound pods Running and Ready), and the garbage collector deletes
  the ReplicaSet and marks the pods for deletion when the Deployment goes (a cascading delete);
- a new namespace gets its `default` ServiceAccount and `kube-root-ca.crt` ConfigMap from the controllers.

Nodes are plain objects (no agent): what the scheduler reads is their allocatable, labels and taints.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.k8s.binaries import ROOT
from harness.k8s.kubecomponents_on_kubenode import KubeControlPlaneOnKubenode

SCENARIO = "real kube-scheduler and kube-controller-manager on kubenode apiserver"
COMPONENTS = ("kube-scheduler", "kube-controller-manager", "kubenode apiserver")
RESOURCE = "/apis/resource.k8s.io/v1"
PODS = "/api/v1/namespaces/default/pods"
NOW = "2026-01-01T00:00:00Z"
KUBECTL = ROOT / ".venv" / "bin" / "kubectl"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
HEARTBEAT_S = 5.0  # the kubelet renews its node's Lease every 10 s; the node controller allows 50 s


def _micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Heartbeats:
    """The kubelet's part that kube-controller-manager's node lifecycle controller watches: each node's Lease
    in kube-node-lease, renewed while the module runs (without it the nodes go Unknown and get tainted)."""

    def __init__(self, plane: KubeControlPlaneOnKubenode) -> None:
        self.plane = plane
        self.nodes: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def renew(self, name: str) -> None:
        status, lease = self.plane.request("GET", f"{LEASES}/{name}")
        if status == 404:
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": name, "namespace": "kube-node-lease"},
                     "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}  # fmt: skip
            lease["spec"]["renewTime"] = _micro_now()
            self.plane.request("POST", LEASES, lease)
            return
        lease["spec"]["renewTime"] = _micro_now()
        self.plane.request("PUT", f"{LEASES}/{name}", lease)

    def _run(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            for name in list(self.nodes):
                try:
                    self.renew(name)
                except OSError:  # the server is going away with the module's fixture
                    return


@pytest.fixture(scope="module")
def plane() -> Iterator[KubeControlPlaneOnKubenode]:
    with KubeControlPlaneOnKubenode(scheduler=True, controller_manager=True) as plane:
        plane.heartbeats = Heartbeats(plane)  # type: ignore[attr-defined]
        try:
            yield plane
        finally:
            plane.heartbeats.stop.set()  # type: ignore[attr-defined]


def node(name: str, cpus: int, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110", "kubenode.io/cpu": str(cpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "interop": "kube-scheduler"}},
        "spec": {"taints": taints or []},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
                            "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}],
        },
    }  # fmt: skip


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def create_node(plane: KubeControlPlaneOnKubenode, body: dict[str, Any]) -> None:
    name = body["metadata"]["name"]
    status, created = plane.request("POST", "/api/v1/nodes", body)
    assert status == 201, created
    plane.heartbeats.renew(name)  # type: ignore[attr-defined]
    plane.heartbeats.nodes.add(name)  # type: ignore[attr-defined]
    # a create keeps no status: write it as the kubelet would (a merge patch: the node controller may have
    # written the Node meanwhile)
    status, reply = plane.api.request(  # type: ignore[union-attr]
        "PATCH", f"/api/v1/nodes/{name}/status", {"status": body["status"]},
        content_type="application/merge-patch+json",
    )  # fmt: skip
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
    # written through events.k8s.io/v1 (client-go's tools/events, as discovery lists the group): the
    # action and the reporting instance are its fields
    scheduled = next(
        e
        for e in events["items"]
        if (e["involvedObject"]["name"], e["reason"]) == ("wants-three", "Scheduled")
    )
    assert scheduled["action"] == "Binding" and scheduled["reportingComponent"] == "default-scheduler", (
        scheduled
    )
    assert scheduled["reportingInstance"].startswith("default-scheduler-"), scheduled


def test_kube_scheduler_binds_by_kubenode_gpu(plane: KubeControlPlaneOnKubenode) -> None:
    for name, count in (("gpu-none", 0), ("gpu-two", 2)):
        body = node(name, 4)
        for key in ("capacity", "allocatable"):
            body["status"][key]["kubenode.io/gpu"] = str(count)
        create_node(plane, body)
    gpus = {"kubenode.io/gpu": "2"}
    wanting = pod("wants-gpus", nodes=("gpu-none", "gpu-two"))
    wanting["spec"]["containers"][0]["resources"] = {"requests": gpus, "limits": gpus}
    assert plane.request("POST", PODS, wanting)[0] == 201
    assert wait_pod(plane, "wants-gpus", bound)["spec"]["nodeName"] == "gpu-two"
    more = pod("wants-more-gpus", nodes=("gpu-none", "gpu-two"))
    more["spec"]["containers"][0]["resources"] = {
        "requests": {"kubenode.io/gpu": "1"},
        "limits": {"kubenode.io/gpu": "1"},
    }
    assert plane.request("POST", PODS, more)[0] == 201
    waiting = wait_pod(plane, "wants-more-gpus", unschedulable)
    message = next(c["message"] for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "Insufficient kubenode.io/gpu" in message, message


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


def test_kube_scheduler_preempts_a_lower_priority_pod(plane: KubeControlPlaneOnKubenode) -> None:
    meta = {"name": "interop-high"}
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": meta, "value": 1000}
    assert plane.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", high)[0] == 201
    create_node(plane, node("preempt", 1))
    assert plane.request("POST", PODS, pod("low", cpus=1, nodes=("preempt",)))[0] == 201
    wait_pod(plane, "low", bound)
    urgent = pod("urgent", cpus=1, nodes=("preempt",))
    urgent["spec"]["priorityClassName"] = "interop-high"
    status, created = plane.request("POST", PODS, urgent)
    assert status == 201 and created["spec"]["priority"] == 1000, created
    victim = wait_pod(plane, "low", lambda p: bool(p["metadata"].get("deletionTimestamp")))
    disruption = [c for c in victim["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"]
    assert disruption and disruption[0]["reason"] == "PreemptionByScheduler", victim["status"]
    nominated = wait_pod(plane, "urgent", lambda p: p["status"].get("nominatedNodeName") == "preempt")
    assert not nominated["spec"].get("nodeName")
    # the kubelet's part: the victim's containers stopped, its pod object goes
    status, reply = plane.request("DELETE", f"{PODS}/low", {"gracePeriodSeconds": 0})
    assert status == 200, reply
    assert wait_pod(plane, "urgent", bound)["spec"]["nodeName"] == "preempt"


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


# -- kube-controller-manager -------------------------------------------------------------------------------


def wait_for(what: str, check: Any, plane: KubeControlPlaneOnKubenode, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"{what} not within {timeout} s (last: {value})\n{plane.logs()}")


def test_kube_controller_manager_syncs_and_takes_its_lease(
    plane: KubeControlPlaneOnKubenode, record_property: Any
) -> None:
    plane.wait_for_lease("kube-controller-manager")
    manager = plane.controller_manager
    assert manager is not None
    wait_for("the garbage collector's sync", lambda: "synced garbage collector" in manager.log(), plane)
    log = manager.log()
    failures = [
        line for line in log.splitlines()
        if re.search(r"Failed to watch|failed to list|forbidden|watch ended with error|Unable to sync", line)
    ]  # fmt: skip
    assert not failures, "\n".join(failures[:20])
    record_property("controller_manager_start_s", round(plane.start_seconds["kube-controller-manager"], 2))


def play_kubelet(plane: KubeControlPlaneOnKubenode, selector: str) -> int:
    """Mark every bound, not yet running pod of the selector Running and Ready, as a kubelet would."""
    _, pods = plane.request("GET", f"{PODS}?labelSelector={selector}")
    marked = 0
    for item in pods["items"]:
        if not item["spec"].get("nodeName") or item["status"].get("phase") == "Running":
            continue
        kinds = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
        conditions = [{"type": t, "status": "True", "lastTransitionTime": NOW} for t in kinds]
        container = {"name": "main", "ready": True, "started": True, "restartCount": 0, "image": "busybox",
                     "imageID": "", "state": {"running": {"startedAt": NOW}}}  # fmt: skip
        status = {
            "phase": "Running", "conditions": conditions, "startTime": NOW, "podIP": "10.1.0.1",
            "containerStatuses": [container],
        }  # fmt: skip
        name = item["metadata"]["name"]
        code, reply = plane.api.request(  # type: ignore[union-attr]
            "PATCH", f"{PODS}/{name}/status", {"status": status},
            content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
        assert code == 200, reply
        marked += 1
    return marked


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    limits = {"kubenode.io/cpu": "1"}
    container = {"name": "main", "image": "busybox", "resources": {"requests": limits, "limits": limits}}
    template = {"metadata": {"labels": labels}, "spec": pod("template", nodes=("workers",))["spec"]}
    template["spec"]["containers"] = [container]
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template},
    }  # fmt: skip


@pytest.mark.timeout(180)
def test_kube_controller_manager_runs_a_deployment_and_collects_its_garbage(
    plane: KubeControlPlaneOnKubenode, record_property: Any
) -> None:
    create_node(plane, node("workers", 8))
    path = "/apis/apps/v1/namespaces/default/deployments"
    started = time.monotonic()
    assert plane.request("POST", path, deployment("web", 3))[0] == 201

    def available() -> bool:
        play_kubelet(plane, "app=web")
        _, current = plane.request("GET", f"{path}/web")
        return bool((current.get("status") or {}).get("availableReplicas") == 3)

    wait_for("3 available replicas", available, plane, timeout=90)
    record_property("deployment_available_s", round(time.monotonic() - started, 2))
    _, sets = plane.request("GET", "/apis/apps/v1/namespaces/default/replicasets?labelSelector=app=web")
    assert len(sets["items"]) == 1
    owner = sets["items"][0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Deployment", "web", True)
    _, pods = plane.request("GET", f"{PODS}?labelSelector=app=web")
    assert {p["spec"]["nodeName"] for p in pods["items"]} == {"workers"} and len(pods["items"]) == 3

    # the cascading delete: the garbage collector removes the ReplicaSet, which its pods' owner was
    status, reply = plane.request("DELETE", f"{path}/web", {"propagationPolicy": "Background"})
    assert status == 200, reply

    def collected() -> bool:
        _, left = plane.request("GET", "/apis/apps/v1/namespaces/default/replicasets?labelSelector=app=web")
        _, pods = plane.request("GET", f"{PODS}?labelSelector=app=web")
        terminating = all(p["metadata"].get("deletionTimestamp") for p in pods["items"])
        return not left["items"] and terminating

    wait_for("the ReplicaSet collected and its pods terminating", collected, plane)


def test_new_namespace_gets_its_service_account_and_root_ca(plane: KubeControlPlaneOnKubenode) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    assert plane.request("POST", "/api/v1/namespaces", namespace)[0] == 201
    account = "/api/v1/namespaces/team-a/serviceaccounts/default"
    wait_for("the default ServiceAccount", lambda: plane.request("GET", account)[0] == 200, plane)
    _, config = wait_for(
        "kube-root-ca.crt",
        lambda: (
            (r := plane.request("GET", "/api/v1/namespaces/team-a/configmaps/kube-root-ca.crt"))[0] == 200
            and r
        ),
        plane,
    )
    assert "BEGIN CERTIFICATE" in config["data"]["ca.crt"]


def test_kube_scheduler_spreads_by_topology(plane: KubeControlPlaneOnKubenode) -> None:
    for name in ("spread-a", "spread-b"):
        create_node(plane, node(name, 8))
    for i in range(4):
        spread = pod(f"spread-{i}", cpus=1, nodes=("spread-a", "spread-b"))
        spread["metadata"]["labels"] = {"app": "spread"}
        spread["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}},
        }]  # fmt: skip
        assert plane.request("POST", PODS, spread)[0] == 201
        wait_pod(plane, f"spread-{i}", bound)
    _, pods = plane.request("GET", f"{PODS}?labelSelector=app=spread")
    placed = [p["spec"]["nodeName"] for p in pods["items"]]
    assert sorted(placed) == ["spread-a", "spread-a", "spread-b", "spread-b"], placed


def test_kube_controller_manager_runs_a_job_to_completion(plane: KubeControlPlaneOnKubenode) -> None:
    create_node(plane, node("jobs", 4))
    template = {"metadata": {"labels": {"app": "once"}}, "spec": pod("t", nodes=("jobs",))["spec"]}
    template["spec"]["restartPolicy"] = "Never"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": "default"},
           "spec": {"completions": 1, "backoffLimit": 0, "template": template}}  # fmt: skip
    status, created = plane.request("POST", "/apis/batch/v1/namespaces/default/jobs", job)
    assert status == 201, created

    def finished() -> bool:
        _, pods = plane.request("GET", f"{PODS}?labelSelector=job-name=once")
        for item in pods["items"]:
            if item["spec"].get("nodeName") and item["status"].get("phase") == "Pending":
                done = {"phase": "Succeeded", "startTime": NOW, "containerStatuses": [
                    {"name": "main", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
                     "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": NOW,
                                              "finishedAt": NOW}}}]}  # fmt: skip
                plane.api.request(  # type: ignore[union-attr]
                    "PATCH", f"{PODS}/{item['metadata']['name']}/status", {"status": done},
                    content_type="application/strategic-merge-patch+json",
                )  # fmt: skip
        _, current = plane.request("GET", "/apis/batch/v1/namespaces/default/jobs/once")
        conditions = (current.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    wait_for("the Job Complete", finished, plane)


def test_kube_controller_manager_runs_a_daemonset(plane: KubeControlPlaneOnKubenode) -> None:
    for name in ("ds-a", "ds-b"):
        body = node(name, 2)
        body["metadata"]["labels"]["interop"] = "daemons"
        create_node(plane, body)
    labels = {"app": "everywhere"}
    spec = pod("t")["spec"]
    spec["nodeSelector"] = {"interop": "daemons"}
    template = {"metadata": {"labels": labels}, "spec": spec}
    meta = {"name": "everywhere", "namespace": "default"}
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    }  # fmt: skip
    status, created = plane.request("POST", "/apis/apps/v1/namespaces/default/daemonsets", daemonset)
    assert status == 201, created

    def on_both() -> Any:
        _, pods = plane.request("GET", f"{PODS}?labelSelector=app=everywhere")
        placed = {p["spec"].get("nodeName") for p in pods["items"]}
        return {"ds-a", "ds-b"} <= placed and placed

    wait_for("a daemon pod on each node", on_both, plane)


def test_kube_controller_manager_makes_claims_from_templates(plane: KubeControlPlaneOnKubenode) -> None:
    create_node(plane, node("tmpl", 1))
    device_class = {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "cpu.kubenode.io"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'cpu.kubenode.io'"}}]},
    }  # fmt: skip
    assert plane.request("POST", f"{RESOURCE}/deviceclasses", device_class)[0] == 201
    cpus = [{"name": f"cpu-{i}", "attributes": {"numaNode": {"int": 0}}} for i in range(2)]
    slice_ = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "tmpl-cpus"},
        "spec": {"driver": "cpu.kubenode.io", "nodeName": "tmpl", "devices": cpus,
                 "pool": {"name": "tmpl", "generation": 1, "resourceSliceCount": 1}},
    }  # fmt: skip
    assert plane.request("POST", f"{RESOURCE}/resourceslices", slice_)[0] == 201
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "two-cpus", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "cpus", "exactly": {
                    "deviceClassName": "cpu.kubenode.io", "count": 2}}]}}}}  # fmt: skip
    assert plane.request("POST", f"{RESOURCE}/namespaces/default/resourceclaimtemplates", template)[0] == 201
    user = pod("templated", nodes=("tmpl",))
    user["spec"]["resourceClaims"] = [{"name": "cpus", "resourceClaimTemplateName": "two-cpus"}]
    user["spec"]["containers"][0]["resources"] = {"claims": [{"name": "cpus"}]}
    assert plane.request("POST", PODS, user)[0] == 201
    placed = wait_pod(plane, "templated", bound)
    statuses = placed["status"].get("resourceClaimStatuses") or []
    assert statuses and statuses[0]["name"] == "cpus", placed["status"]
    claim_name = statuses[0]["resourceClaimName"]
    _, claim = plane.request("GET", f"{RESOURCE}/namespaces/default/resourceclaims/{claim_name}")
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Pod", "templated")
    devices = sorted(r["device"] for r in claim["status"]["allocation"]["devices"]["results"])
    assert devices == ["cpu-0", "cpu-1"]


@pytest.mark.timeout(240)
def test_kube_controller_manager_marks_a_silent_node_unreachable(plane: KubeControlPlaneOnKubenode) -> None:
    create_node(plane, node("silent", 1))
    time.sleep(HEARTBEAT_S)
    plane.heartbeats.nodes.discard("silent")  # type: ignore[attr-defined]

    def tainted() -> Any:
        _, current = plane.request("GET", "/api/v1/nodes/silent")
        ready = next(c for c in current["status"]["conditions"] if c["type"] == "Ready")
        taints = {(t["key"], t["effect"]) for t in current["spec"].get("taints") or []}
        wanted = {
            ("node.kubernetes.io/unreachable", "NoSchedule"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
        }
        return ready["status"] == "Unknown" and wanted <= taints and taints

    wait_for("the silent node Unknown and tainted unreachable", tainted, plane, timeout=120)


@pytest.mark.timeout(180)
def test_kube_controller_manager_rolls_out_and_kubectl_undoes(plane: KubeControlPlaneOnKubenode) -> None:
    create_node(plane, node("rollout", 8))
    body = deployment("roll", 2)
    body["spec"]["template"]["spec"]["affinity"] = pod("x", nodes=("rollout",))["spec"]["affinity"]
    path = "/apis/apps/v1/namespaces/default/deployments"
    assert plane.request("POST", path, body)[0] == 201

    def settled(image: str) -> Any:
        play_kubelet(plane, "app=roll")
        _, current = plane.request("GET", f"{path}/roll")
        status = current.get("status") or {}
        done = status.get("updatedReplicas") == 2 and status.get("availableReplicas") == 2
        observed = status.get("observedGeneration") == current["metadata"]["generation"]
        done = done and status.get("replicas") == 2 and observed
        return done and current["spec"]["template"]["spec"]["containers"][0]["image"] == image

    wait_for("revision 1 available", lambda: settled("busybox"), plane, timeout=90)
    kubeconfig = str(plane.api.kubeconfig)  # type: ignore[union-attr]

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(KUBECTL), "--kubeconfig", kubeconfig, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=90)

    run = kubectl("set", "image", "deployment/roll", "main=busybox:1.36")
    assert run.returncode == 0, run.stderr
    wait_for("revision 2 available", lambda: settled("busybox:1.36"), plane, timeout=90)
    _, sets = plane.request("GET", "/apis/apps/v1/namespaces/default/replicasets?labelSelector=app=roll")
    revisions = sorted(
        s["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for s in sets["items"]
    )
    assert revisions == ["1", "2"], revisions
    run = kubectl("rollout", "undo", "deployment/roll")
    assert run.returncode == 0 and "rolled back" in run.stdout, (run.stdout, run.stderr)
    wait_for("revision 3 (the first template again) available", lambda: settled("busybox"), plane, timeout=90)
    run = kubectl("rollout", "status", "deployment/roll", "--timeout=60s")
    assert run.returncode == 0 and "successfully rolled out" in run.stdout, (run.stdout, run.stderr)


@pytest.fixture(scope="module")
def sa_plane() -> Iterator[KubeControlPlaneOnKubenode]:
    """kube-controller-manager as kubeadm runs it: each controller as its own ServiceAccount."""
    with KubeControlPlaneOnKubenode(
        scheduler=True, controller_manager=True, service_account_credentials=True
    ) as p:
        p.heartbeats = Heartbeats(p)  # type: ignore[attr-defined]
        try:
            yield p
        finally:
            p.heartbeats.stop.set()  # type: ignore[attr-defined]


@pytest.mark.timeout(180)
def test_controllers_as_their_service_accounts_run_a_deployment(sa_plane: KubeControlPlaneOnKubenode) -> None:
    plane = sa_plane
    plane.wait_for_lease("kube-controller-manager")
    create_node(plane, node("workers", 8))
    assert (
        plane.request("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", 2))[0] == 201
    )

    def available() -> bool:
        play_kubelet(plane, "app=web")
        _, current = plane.request("GET", "/apis/apps/v1/namespaces/default/deployments/web")
        return bool((current.get("status") or {}).get("availableReplicas") == 2)

    wait_for("2 available replicas", available, plane, timeout=90)
    _, accounts = plane.request("GET", "/api/v1/namespaces/kube-system/serviceaccounts")
    names = {a["metadata"]["name"] for a in accounts["items"]}
    assert {"deployment-controller", "replicaset-controller", "generic-garbage-collector"} <= names, names
    assert plane.controller_manager is not None
    denied = [line for line in plane.controller_manager.log().splitlines() if "forbidden" in line]
    assert not denied, "\n".join(denied[:10])


@pytest.mark.timeout(180)
def test_kube_controller_manager_runs_a_statefulset_in_order(plane: KubeControlPlaneOnKubenode) -> None:
    """Without kube's StatefulSet defaults the real controller manager panicked (revisionHistoryLimit)."""
    create_node(plane, node("ordered", 8))
    labels = {"app": "ordered"}
    template = {"metadata": {"labels": labels}, "spec": pod("t", nodes=("ordered",))["spec"]}
    meta = {"name": "ordered", "namespace": "default"}
    spec = {
        "replicas": 2,
        "serviceName": "ordered",
        "selector": {"matchLabels": labels},
        "template": template,
    }
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": spec}
    assert plane.request("POST", "/apis/apps/v1/namespaces/default/statefulsets", sts)[0] == 201

    def both_ready() -> bool:
        play_kubelet(plane, "app=ordered")
        _, current = plane.request("GET", "/apis/apps/v1/namespaces/default/statefulsets/ordered")
        return bool((current.get("status") or {}).get("readyReplicas") == 2)

    wait_for("ordered-0 then ordered-1 ready", both_ready, plane, timeout=90)
    _, pods = plane.request("GET", f"{PODS}?labelSelector=app=ordered")
    assert sorted(p["metadata"]["name"] for p in pods["items"]) == ["ordered-0", "ordered-1"]
    assert plane.controller_manager is not None and plane.controller_manager.alive()
