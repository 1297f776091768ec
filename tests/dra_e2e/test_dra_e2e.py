"""Dynamic Resource Allocation end to end on real processes: `kubenode apiserver`, `kubenode scheduler run`
and `kubenode controller-manager`, with two plain Nodes (no agents: preparing devices is the agent's later
part) publishing ResourceSlices through their own node credentials.

A template asks for a device by a CEL selector on an attribute and a capacity that only node-b's
device meets. A pod using it gets a claim from the controller (named `<pod>-<entry>-xxxxx`, owned by
the pod, recorded in its status), the scheduler allocates node-b's device and binds the pod there.
A second pod wanting the same device stays Unschedulable until the first is deleted, its claim goes,
and it is bound in turn. The real kubectl lists and describes the objects; the Node authorizer and
NodeRestriction hold each node to its own slices and its own pods' claims.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from controllers.resources import RESOURCE_CLAIM_TEMPLATES
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Forbidden,
    KubeClient,
    NotFound,
    load_kubeconfig,
)
from tests.controllers.cluster import Cluster, wait_for
from tests.scheduler_live.support import node

DRIVER = "gpu.example.com"
GROUP_VERSION = "resource.k8s.io/v1"
SELECTOR = (
    f"device.attributes['{DRIVER}'].model == 'h100' && "
    f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"
)


def resource_slice(node_name: str, model: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION, "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER, "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"model": {"string": model}},
                         "capacity": {"memory": {"value": memory}}}],
        },
    }  # fmt: skip


def device_class(driver: str) -> dict[str, Any]:
    """A DeviceClass named after its driver, selecting that driver's devices."""
    return {
        "apiVersion": GROUP_VERSION, "kind": "DeviceClass", "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }  # fmt: skip


def gpu_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "big-gpu"}],
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "600"],
                            "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }  # fmt: skip


def node_client(api: ApiServerProcess, name: str) -> KubeClient:
    return KubeClient(load_kubeconfig(api.kubeconfig_for(f"system:node:{name}", ["system:nodes"])))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with ApiServerProcess() as api:
        made = Cluster(api)
        try:
            yield made
        finally:
            assert not made.close()


def claim_of(client: KubeClient, pod_name: str) -> dict[str, Any] | None:
    """The pod's claim, as its status names it (the claim controller records it); None until then."""
    pod = client.get(PODS, pod_name, "default")
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    if not statuses:
        return None
    try:
        claim: dict[str, Any] = client.get(RESOURCE_CLAIMS, statuses[0]["resourceClaimName"], "default")
    except NotFound:
        return None
    return claim


def pod_condition(cluster: Cluster, pod_name: str) -> dict[str, Any]:
    pod = cluster.client.get(PODS, pod_name, "default")
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), {})


def test_claim_from_template_allocated_bound_and_released(cluster: Cluster) -> None:
    admin = cluster.client
    for name in ("node-a", "node-b"):
        admin.create(NODES, node(name))
    small, big = resource_slice("node-a", "a100", "16Gi"), resource_slice("node-b", "h100", "80Gi")
    with closing(node_client(cluster.api, "node-a")) as a, closing(node_client(cluster.api, "node-b")) as b:
        a.create(RESOURCE_SLICES, small)
        b.create(RESOURCE_SLICES, big)
    admin.create(DEVICE_CLASSES, device_class(DRIVER))
    admin.create(RESOURCE_CLAIM_TEMPLATES, {
        "apiVersion": GROUP_VERSION, "kind": "ResourceClaimTemplate",
        "metadata": {"name": "big-gpu", "namespace": "default"},
        "spec": {"metadata": {"labels": {"team": "ml"}}, "spec": {"devices": {"requests": [{
            "name": "gpu",
            "exactly": {"deviceClassName": DRIVER, "selectors": [{"cel": {"expression": SELECTOR}}]},
        }]}}},
    }, "default")  # fmt: skip

    first = admin.create(PODS, gpu_pod("first"), "default")
    claim = wait_for(lambda: claim_of(cluster.client, "first"), 60, "the first pod's claim")
    meta = claim["metadata"]
    assert meta["name"].startswith("first-gpu-") and len(meta["name"]) == len("first-gpu-") + 5
    assert meta["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert meta["labels"] == {"team": "ml"}
    assert meta["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Pod", "name": "first", "uid": first["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True,
    }]  # fmt: skip
    bound = wait_for(
        lambda: admin.get(PODS, "first", "default")["spec"].get("nodeName"), 60, "the first pod bound"
    )
    assert bound == "node-b"
    claim = admin.get(RESOURCE_CLAIMS, meta["name"], "default")
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["pool"], r["device"], r["request"]) for r in results] == [("node-b", "gpu-0", "gpu")]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [first["metadata"]["uid"]]

    admin.create(PODS, gpu_pod("second"), "default")
    second_claim = wait_for(lambda: claim_of(cluster.client, "second"), 60, "the second pod's claim")
    wait_for(
        lambda: pod_condition(cluster, "second").get("reason") == "Unschedulable", 60, "second unschedulable"
    )
    assert not admin.get(PODS, "second", "default")["spec"].get("nodeName")

    table = cluster.out("get", "resourceclaims,resourceslices,deviceclasses")
    assert f"resourceclaim.resource.k8s.io/{meta['name']}" in table and "allocated,reserved" in table
    assert f"resourceclaim.resource.k8s.io/{second_claim['metadata']['name']}" in table and "pending" in table
    assert (
        "node-b-gpus" in table and "node-a-gpus" in table and f"deviceclass.resource.k8s.io/{DRIVER}" in table
    )
    described = cluster.out("describe", "resourceclaim", meta["name"])
    assert "Allocation:" in described and "gpu-0" in described and "Reserved For:" in described

    _node_may_touch_only_its_own(cluster, meta["name"], second_claim["metadata"]["name"])

    # No agent runs on node-b to finish the pod: delete it at once, as `kubectl delete --force` does.
    cluster.out("delete", "pod", "first", "--grace-period=0", "--force")
    wait_for(lambda: claim_gone(admin, meta["name"]), 60, "the first pod's claim deleted")
    assert (
        wait_for(
            lambda: admin.get(PODS, "second", "default")["spec"].get("nodeName"), 60, "the second pod bound"
        )
        == "node-b"
    )
    second = admin.get(RESOURCE_CLAIMS, second_claim["metadata"]["name"], "default")
    assert second["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


def claim_gone(client: KubeClient, claim_name: str) -> bool:
    try:
        client.get(RESOURCE_CLAIMS, claim_name, "default")
    except NotFound:
        return True
    return False


def _node_may_touch_only_its_own(cluster: Cluster, bound_claim: str, pending_claim: str) -> None:
    with closing(node_client(cluster.api, "node-b")) as b, closing(node_client(cluster.api, "node-a")) as a:
        assert b.get(RESOURCE_CLAIMS, bound_claim, "default")["metadata"]["name"] == bound_claim
        with pytest.raises(Forbidden) as denied:
            a.get(RESOURCE_CLAIMS, bound_claim, "default")
        assert "no relationship found between node 'node-a' and this object" in str(denied.value)
        with pytest.raises(Forbidden):
            b.get(RESOURCE_CLAIMS, pending_claim, "default")  # its pod is not bound to node-b
        with pytest.raises(Forbidden) as denied:
            a.create(
                RESOURCE_SLICES, {**resource_slice("node-b", "x", "1Gi"), "metadata": {"name": "forged"}}
            )
        assert "can only create ResourceSlice with the same NodeName as the requesting node" in str(
            denied.value
        )
        with pytest.raises(Forbidden):
            a.delete(RESOURCE_SLICES, "node-b-gpus")
        slices = a.list(RESOURCE_SLICES)["items"]
        assert {s["metadata"]["name"] for s in slices} == {"node-a-gpus", "node-b-gpus"}
        a.patch(RESOURCE_SLICES, "node-a-gpus", {"metadata": {"labels": {"checked": "yes"}}})
    events = json.loads(cluster.out("get", "events", "-o", "json"))["items"]
    assert any(e["reason"] == "ResourceClaimCreated" for e in events)


def test_a_shared_claim_is_released_when_its_pods_go(cluster: Cluster) -> None:
    """A claim made by hand (no owner) outlives its pods: the controller removes each pod that goes
    from `reservedFor`, and deallocates the claim when the last one goes, so its device is free."""
    admin = cluster.client
    claim = {
        "apiVersion": GROUP_VERSION, "kind": "ResourceClaim", "metadata": {"name": "shared"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }  # fmt: skip
    admin.create(RESOURCE_CLAIMS, claim, "default")
    uids = []
    for name in ("user-1", "user-2"):
        pod = gpu_pod(name)
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
        uids.append(admin.create(PODS, pod, "default")["metadata"]["uid"])

    def reserved() -> list[str]:
        status = admin.get(RESOURCE_CLAIMS, "shared", "default").get("status") or {}
        return sorted(r["uid"] for r in status.get("reservedFor") or [])

    wait_for(lambda: reserved() == sorted(uids), 60, "both pods in reservedFor")

    # reservedFor is written at PreBind, before the binding: wait for both bindings.
    def bound_to() -> list[str]:
        nodes = [admin.get(PODS, n, "default")["spec"].get("nodeName") for n in ("user-1", "user-2")]
        return nodes if all(nodes) else []

    nodes = set(wait_for(bound_to, 60, "both pods bound"))
    assert len(nodes) == 1  # a shared claim's pods go where its devices are
    cluster.out("delete", "pod", "user-1", "--grace-period=0", "--force")
    wait_for(lambda: reserved() == [uids[1]], 60, "the deleted pod out of reservedFor")
    assert admin.get(RESOURCE_CLAIMS, "shared", "default")["status"]["allocation"]
    cluster.out("delete", "pod", "user-2", "--grace-period=0", "--force")
    wait_for(
        lambda: not admin.get(RESOURCE_CLAIMS, "shared", "default").get("status"), 60, "the claim deallocated"
    )
    assert "pending" in cluster.out("get", "resourceclaim", "shared")
    admin.delete(RESOURCE_CLAIMS, "shared", "default")


def test_a_claim_deleted_while_in_use_keeps_its_device(cluster: Cluster) -> None:
    """Issue 51 hole 4: the scheduler puts kube's `resource.kubernetes.io/delete-protection` finalizer on
    the claim it allocates, so a claim deleted while a pod uses it stays (deletionTimestamp set, still
    allocated) and its device is given to nobody else; once the pod goes, the resourceclaim controller
    deallocates it and removes the finalizer, the claim goes and the device is free."""
    admin = cluster.client
    for name in ("held", "wanted"):
        admin.create(RESOURCE_CLAIMS, {
            "apiVersion": GROUP_VERSION, "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        }, "default")  # fmt: skip
    holder = gpu_pod("holder")
    holder["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "held"}]
    admin.create(PODS, holder, "default")
    wait_for(lambda: admin.get(PODS, "holder", "default")["spec"].get("nodeName"), 60, "the holder bound")
    held = admin.get(RESOURCE_CLAIMS, "held", "default")
    assert held["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"], held["metadata"]
    device = held["status"]["allocation"]["devices"]["results"][0]
    cluster.out("delete", "resourceclaim", "held", "--wait=false")
    held = admin.get(RESOURCE_CLAIMS, "held", "default")  # still there: its pod uses it
    assert held["metadata"].get("deletionTimestamp") and held["status"]["allocation"], held
    third = gpu_pod("third")
    third["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "wanted"}]
    admin.create(PODS, third, "default")
    wait_for(
        lambda: pod_condition(cluster, "third").get("reason") == "Unschedulable", 60, "third unschedulable"
    )
    assert not (admin.get(RESOURCE_CLAIMS, "wanted", "default").get("status") or {}).get("allocation")
    cluster.out("delete", "pod", "holder", "--grace-period=0", "--force")
    wait_for(lambda: claim_gone(admin, "held"), 60, "the deleted claim gone once unused")
    wait_for(lambda: admin.get(PODS, "third", "default")["spec"].get("nodeName"), 60, "the third pod bound")
    wanted = admin.get(RESOURCE_CLAIMS, "wanted", "default")
    assert wanted["status"]["allocation"]["devices"]["results"][0]["device"] == device["device"]
    cluster.out("delete", "pod", "third", "--grace-period=0", "--force")


def test_a_node_deletes_its_own_slices_as_a_collection(cluster: Cluster) -> None:
    """The kubelet's DRA manager clears its slices with one DELETE of the collection, selected by
    `spec.nodeName`: allowed for the node's own; another node's slice is refused."""
    with closing(node_client(cluster.api, "node-a")) as a:
        with pytest.raises(Forbidden):
            a.request("DELETE", RESOURCE_SLICES.path(), query={"fieldSelector": "spec.nodeName=node-b"})
        # Issue 51: a collection that takes in another node's slice is refused before anything is deleted.
        with pytest.raises(Forbidden) as denied:
            a.request("DELETE", RESOURCE_SLICES.path())
        assert "can only delete ResourceSlice with the same NodeName as the requesting node" in str(
            denied.value
        )
        names = {s["metadata"]["name"] for s in cluster.client.list(RESOURCE_SLICES)["items"]}
        assert names == {"node-a-gpus", "node-b-gpus"}
        gone = a.request("DELETE", RESOURCE_SLICES.path(), query={"fieldSelector": "spec.nodeName=node-a"})
        assert [s["metadata"]["name"] for s in gone["items"]] == ["node-a-gpus"]
    names = {s["metadata"]["name"] for s in cluster.client.list(RESOURCE_SLICES)["items"]}
    assert names == {"node-b-gpus"}
