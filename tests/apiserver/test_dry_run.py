"""dryRun=All persists nothing, on every verb and subresource the server serves (issue 26).

Each dry run must answer as the real request would and leave the store's revision where it was:
a list's resourceVersion is the store revision, so one unchanged number proves nothing was written.
An unsupported dryRun value is refused with kube's 422 before anything is read or written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess
from tests.apiserver.kubectl_support import Kubectl

NS = "/api/v1/namespaces/dry"
PODS = NS + "/pods"


def pod(name: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"set": "dry"}},
        "spec": spec,
    }


def ok(api: ApiServerProcess, method: str, path: str, body: object = None, **kw: Any) -> Any:
    status, reply = api.request(method, path, body, **kw)
    assert status in (200, 201), (method, path, status, reply)
    return reply


def revision(api: ApiServerProcess) -> str:
    return str(ok(api, "GET", "/api/v1/pods")["metadata"]["resourceVersion"])


@pytest.fixture(scope="module")
def setup(api: ApiServerProcess) -> ApiServerProcess:
    ok(
        api,
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dry"}},
    )
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    ok(api, "POST", "/api/v1/nodes", node)
    ok(api, "POST", PODS, pod("bound", "n1"))  # deleted gracefully (30 s) by a real delete
    ok(api, "POST", PODS, pod("loose"))  # unbound: deleted at once
    ok(
        api,
        "POST",
        "/api/v1/namespaces/dry/services",
        {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
    )
    ok(api, "POST", NS + "/configmaps", {"metadata": {"name": "cm"}, "data": {"k": "v"}})
    return api


MERGE = "application/merge-patch+json"
DRY = "?dryRun=All"


def dry_requests() -> list[tuple[str, str, object, dict[str, Any]]]:
    """(method, path, body, request options) of a dry run of every verb and subresource served."""
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "bound"}}
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "loose"},
               "target": {"kind": "Node", "name": "n1"}}  # fmt: skip
    label = {"metadata": {"labels": {"x": "y"}}}
    apply = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "applied"},
             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip
    return [
        ("POST", PODS + DRY, pod("new"), {}),
        ("PATCH", PODS + "/bound" + DRY, label, {"content_type": MERGE}),
        ("PATCH", PODS + "/bound/status" + DRY, {"status": {"phase": "Running"}}, {"content_type": MERGE}),
        (
            "PATCH",
            PODS + "/applied" + DRY + "&fieldManager=t",
            apply,
            {"content_type": "application/apply-patch+yaml"},
        ),
        ("DELETE", PODS + "/bound" + DRY, None, {}),
        ("DELETE", PODS + "/loose" + DRY, None, {}),
        ("DELETE", PODS + "/loose", {"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}, {}),
        ("DELETE", PODS + DRY, None, {}),
        ("DELETE", PODS + "?labelSelector=set%3Ddry", {"dryRun": ["All"], "gracePeriodSeconds": 0}, {}),
        ("POST", PODS + "/bound/eviction" + DRY, eviction, {}),
        ("POST", PODS + "/bound/eviction", {**eviction, "deleteOptions": {"dryRun": ["All"]}}, {}),
        ("POST", PODS + "/loose/binding" + DRY, binding, {}),
        ("POST", NS + "/bindings" + DRY, binding, {}),
        ("PATCH", "/api/v1/nodes/n1" + DRY, {"spec": {"unschedulable": True}}, {"content_type": MERGE}),
        ("PATCH", "/api/v1/namespaces/dry/services/s" + DRY, label, {"content_type": MERGE}),
        ("DELETE", "/api/v1/namespaces/dry/services/s" + DRY, None, {}),
        ("POST", NS + "/secrets" + DRY, {"metadata": {"name": "sec"}, "stringData": {"k": "v"}}, {}),
        ("PATCH", NS + "/configmaps/cm" + DRY, {"data": {"k": "w"}}, {"content_type": MERGE}),
        ("DELETE", NS + "/configmaps/cm" + DRY, None, {}),
        ("DELETE", "/api/v1/nodes/n1" + DRY, None, {}),
        ("DELETE", "/api/v1/namespaces/dry" + DRY, None, {}),
    ]


def test_every_dry_run_answers_and_writes_nothing(setup: ApiServerProcess) -> None:
    api = setup
    before = revision(api)
    bound = ok(api, "GET", PODS + "/bound")
    for method, path, body, options in dry_requests():
        ok(api, method, path, body, **options)
    put = {**bound, "metadata": {**bound["metadata"], "labels": {"put": "yes"}}}
    assert ok(api, "PUT", PODS + "/bound" + DRY, put)["metadata"]["labels"] == {"put": "yes"}
    assert ok(api, "PUT", PODS + "/bound/status" + DRY, put)["metadata"]["name"] == "bound"
    assert revision(api) == before
    names = sorted(p["metadata"]["name"] for p in ok(api, "GET", PODS)["items"])
    assert names == ["bound", "loose"]
    assert ok(api, "GET", PODS + "/bound") == bound  # no deletionTimestamp, no label, no node change
    assert "unschedulable" not in ok(api, "GET", "/api/v1/nodes/n1").get("spec", {})
    assert ok(api, "GET", NS + "/configmaps/cm")["data"] == {"k": "v"}


def test_dry_run_delete_answers_what_a_delete_would(setup: ApiServerProcess) -> None:
    graceful = ok(setup, "DELETE", PODS + "/bound" + DRY)
    assert (
        graceful["metadata"]["deletionGracePeriodSeconds"] == 30 and graceful["metadata"]["deletionTimestamp"]
    )
    gone = ok(setup, "DELETE", "/api/v1/namespaces/dry/services/s" + DRY)
    # kube's service registry sets ReturnDeletedObject: the Service that would go, not a Status.
    assert gone["kind"] == "Service" and gone["metadata"]["name"] == "s"
    assert ok(setup, "GET", "/api/v1/namespaces/dry/services/s")["metadata"]["name"] == "s"
    listed = ok(setup, "DELETE", PODS + DRY)
    assert sorted(p["metadata"]["name"] for p in listed["items"]) == ["bound", "loose"]
    assert "kubernetes" in [
        s["metadata"]["name"] for s in ok(setup, "GET", "/api/v1/namespaces/default/services")["items"]
    ]


@pytest.mark.parametrize(
    ("method", "suffix", "body", "kind"),
    [
        ("POST", "", pod("never"), "CreateOptions"),
        ("PATCH", "/bound", {"metadata": {"labels": {"x": "y"}}}, "PatchOptions"),
        ("DELETE", "/loose", None, "DeleteOptions"),
        ("DELETE", "", None, "DeleteOptions"),
        ("POST", "/bound/eviction", {"apiVersion": "policy/v1", "kind": "Eviction"}, "CreateOptions"),
    ],
)
def test_an_unsupported_dry_run_value_is_refused_as_kube_does(
    setup: ApiServerProcess, method: str, suffix: str, body: object, kind: str
) -> None:
    before = revision(setup)
    content_type = MERGE if method == "PATCH" else "application/json"
    status, reply = setup.request(method, PODS + suffix + "?dryRun=Yes", body, content_type=content_type)
    assert status == 422 and reply["reason"] == "Invalid"
    unsupported = 'Unsupported value: []string{"Yes"}: supported values: "All"'
    assert reply["message"] == f'{kind}.meta.k8s.io "" is invalid: dryRun: {unsupported}'
    assert reply["details"]["causes"] == [
        {"reason": "FieldValueNotSupported", "field": "dryRun",
         "message": 'Unsupported value: []string{"Yes"}: supported values: "All"'}
    ]  # fmt: skip
    assert revision(setup) == before
    status, reply = setup.request("DELETE", PODS + "/loose", {"dryRun": ["All", "Later"]})
    assert status == 422 and 'Unsupported value: []string{"All", "Later"}' in reply["message"]


def test_kubectl_server_dry_runs_change_nothing(setup: ApiServerProcess, tmp_path: Path) -> None:
    kubectl = Kubectl(setup.kubeconfig, tmp_path / "cache")
    before = revision(setup)
    out = kubectl.out("-n", "dry", "delete", "pod", "loose", "--dry-run=server")
    assert 'pod "loose" deleted from dry namespace (server dry run)' in out
    out = kubectl.out("-n", "dry", "delete", "pods", "--all", "--dry-run=server")
    assert "bound" in out and "loose" in out and "server dry run" in out
    out = kubectl.out("drain", "n1", "--dry-run=server", "--force", "--ignore-daemonsets")
    assert "evicting pod dry/bound" in out and "(server dry run)" in out
    kubectl.out("cordon", "n1", "--dry-run=server")
    kubectl.out("-n", "dry", "label", "pod", "bound", "x=y", "--dry-run=server")
    kubectl.out("-n", "dry", "run", "r", "--image=busybox", "--dry-run=server")
    kubectl.out("delete", "namespace", "dry", "--dry-run=server")
    kubectl.out("-n", "dry", "delete", "svc", "s", "--dry-run=server")
    assert revision(setup) == before
    out = kubectl.out("-n", "dry", "get", "pods", "-o", "name")
    assert out.split() == ["pod/bound", "pod/loose"]
    assert "SchedulingDisabled" not in kubectl.out("get", "node", "n1")
