"""Pod lifecycle rules: binding, graceful deletion, preconditions, eviction, status patches."""

from __future__ import annotations

from typing import Any

from harness.apiserver import ApiServerProcess
from tests.apiserver.test_rest import PODS, created, pod


def bind(api: ApiServerProcess, name: str, node: str, **meta: Any) -> tuple[int, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, **meta},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    return api.request("POST", f"{PODS}/{name}/binding", body)


def test_binding_sets_node_and_condition_and_refuses_a_second(api: ApiServerProcess) -> None:
    uid = created(api, PODS, pod("bind-me"))["metadata"]["uid"]
    status, body = bind(api, "bind-me", "node-a", uid=uid)
    assert status == 201 and body["kind"] == "Status" and body["status"] == "Success"
    _, got = api.request("GET", PODS + "/bind-me")
    assert got["spec"]["nodeName"] == "node-a"
    scheduled = [c for c in got["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"
    status, body = bind(api, "bind-me", "node-b")
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on pods/binding "bind-me": '
        'pod bind-me is already assigned to node "node-a"'
    )


def test_binding_with_wrong_uid_conflicts_and_missing_pod_is_404(api: ApiServerProcess) -> None:
    created(api, PODS, pod("bind-uid"))
    status, _ = bind(api, "bind-uid", "n", uid="not-the-uid")
    assert status == 409
    assert bind(api, "no-such-pod", "n")[0] == 404


def test_legacy_bindings_endpoint(api: ApiServerProcess) -> None:
    created(api, PODS, pod("legacy"))
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "legacy"},
        "target": {"name": "node-l"},
    }
    status, reply = api.request("POST", "/api/v1/namespaces/default/bindings", body)
    assert status == 201 and reply["status"] == "Success"
    assert api.request("GET", PODS + "/legacy")[1]["spec"]["nodeName"] == "node-l"


def test_bound_pod_is_deleted_gracefully_then_by_grace_zero(api: ApiServerProcess) -> None:
    uid = created(api, PODS, pod("graceful"))["metadata"]["uid"]
    bind(api, "graceful", "node-g")
    status, body = api.request(
        "DELETE", PODS + "/graceful", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 5}
    )
    assert status == 200 and body["metadata"]["deletionGracePeriodSeconds"] == 5
    assert body["metadata"]["deletionTimestamp"] and body["metadata"]["generation"] == 2
    assert api.request("GET", PODS + "/graceful")[0] == 200  # still there until the node confirms
    # A longer grace does not extend it.
    status, again = api.request("DELETE", PODS + "/graceful", {"gracePeriodSeconds": 30})
    assert status == 200 and again["metadata"]["deletionGracePeriodSeconds"] == 5
    # The kubelet's final delete: grace 0 with a uid precondition (a wrong uid conflicts).
    status, _ = api.request(
        "DELETE", PODS + "/graceful", {"gracePeriodSeconds": 0, "preconditions": {"uid": "other"}}
    )
    assert status == 409
    status, _ = api.request(
        "DELETE", PODS + "/graceful", {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
    )
    assert status == 200
    assert api.request("GET", PODS + "/graceful")[0] == 404


def test_unbound_and_terminal_pods_go_at_once(api: ApiServerProcess) -> None:
    created(api, PODS, pod("unbound"))
    assert api.request("DELETE", PODS + "/unbound", {"gracePeriodSeconds": 30})[0] == 200
    assert api.request("GET", PODS + "/unbound")[0] == 404
    created(api, PODS, pod("finished"))
    bind(api, "finished", "node-f")
    status, _ = api.request(
        "PATCH", PODS + "/finished/status", {"status": {"phase": "Succeeded"}},
        content_type="application/strategic-merge-patch+json",
    )  # fmt: skip
    assert status == 200
    assert api.request("DELETE", PODS + "/finished")[0] == 200
    assert api.request("GET", PODS + "/finished")[0] == 404


def test_resource_version_precondition_on_delete(api: ApiServerProcess) -> None:
    obj = created(api, PODS, pod("rv-pre"))
    status, body = api.request("DELETE", PODS + "/rv-pre", {"preconditions": {"resourceVersion": "1"}})
    assert status == 409 and "Precondition failed" in body["message"]
    rv = obj["metadata"]["resourceVersion"]
    assert api.request("DELETE", PODS + "/rv-pre", {"preconditions": {"resourceVersion": rv}})[0] == 200


def test_eviction_deletes_gracefully(api: ApiServerProcess) -> None:
    created(api, PODS, pod("evict-me"))
    bind(api, "evict-me", "node-e")
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "evict-me", "namespace": "default"},
    }
    status, reply = api.request("POST", PODS + "/evict-me/eviction", body)
    assert status == 201 and reply["status"] == "Success"
    _, got = api.request("GET", PODS + "/evict-me")
    assert got["metadata"]["deletionGracePeriodSeconds"] == 30


def test_status_patch_with_uid_precondition_as_the_kubelet_sends_it(api: ApiServerProcess) -> None:
    uid = created(api, PODS, pod("kubelet-status"))["metadata"]["uid"]
    patch = {
        "metadata": {"uid": uid},
        "status": {
            "phase": "Running",
            "podIP": "10.1.2.3",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05.123456+00:00"}
            ],
        },
    }
    status, body = api.request(
        "PATCH", PODS + "/kubelet-status/status", patch, content_type="application/strategic-merge-patch+json"
    )
    assert status == 200, body
    assert body["status"]["phase"] == "Running" and body["status"]["qosClass"] == "BestEffort"
    assert body["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    patch["metadata"]["uid"] = "stale-uid"
    status, body = api.request(
        "PATCH", PODS + "/kubelet-status/status", patch, content_type="application/strategic-merge-patch+json"
    )
    assert status == 409 and "Precondition failed: UID in precondition" in body["message"]


def test_pod_spec_is_mostly_immutable(api: ApiServerProcess) -> None:
    created(api, PODS, pod("immutable"))
    status, body = api.request(
        "PATCH",
        PODS + "/immutable",
        {"spec": {"restartPolicy": "Never"}},
        content_type="application/merge-patch+json",
    )
    assert status == 422 and "pod updates may not change fields" in body["message"]
    status, body = api.request(
        "PATCH",
        PODS + "/immutable",
        {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert status == 200 and body["spec"]["containers"][0]["image"] == "busybox:2"
    assert body["metadata"]["generation"] == 2


def test_lease_microtime_is_six_digits(api: ApiServerProcess) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "node-x"},
        "spec": {"holderIdentity": "node-x", "leaseDurationSeconds": 40, "renewTime": "2026-01-02T03:04:05Z"},
    }
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    obj = created(api, path, lease)
    assert obj["spec"]["renewTime"] == "2026-01-02T03:04:05.000000Z"
    obj["spec"]["renewTime"] = "2026-01-02T03:04:06.5+00:00"
    status, renewed = api.request("PUT", path + "/node-x", obj)
    assert status == 200 and renewed["spec"]["renewTime"] == "2026-01-02T03:04:06.500000Z"
    status, missing = api.request("GET", path + "/nope")
    assert missing["message"] == 'leases.coordination.k8s.io "nope" not found'


def test_replace_with_a_manifest_without_defaults(api: ApiServerProcess) -> None:
    obj = created(api, PODS, pod("replaced"))
    manifest = pod("replaced")
    manifest["metadata"]["labels"] = {"edited": "yes"}
    manifest["spec"]["containers"][0]["image"] = "busybox:latest"  # same pull policy (Always)
    status, body = api.request("PUT", PODS + "/replaced", manifest)
    assert status == 200, body
    assert (
        body["metadata"]["labels"] == {"edited": "yes"}
        and body["spec"]["containers"][0]["image"] == "busybox:latest"
    )
    assert body["metadata"]["uid"] == obj["metadata"]["uid"] and body["spec"]["priority"] == 0
