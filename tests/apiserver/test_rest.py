"""REST verbs against the real server: CRUD, conflicts, selectors, pagination, bad input, validation."""

from __future__ import annotations

from typing import Any

import pytest

from harness.apiserver import ApiServerProcess

PODS = "/api/v1/namespaces/default/pods"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def created(api: ApiServerProcess, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, obj = api.request("POST", path, body)
    assert status == 201, obj.get("message") if isinstance(obj, dict) else obj
    assert isinstance(obj, dict)
    return obj


def test_create_sets_server_fields_and_pod_defaults(api: ApiServerProcess) -> None:
    obj = created(api, PODS, pod("defaults", containers=[{"name": "c", "image": "nginx"}]))
    meta, spec = obj["metadata"], obj["spec"]
    assert meta["namespace"] == "default" and meta["uid"] and meta["generation"] == 1
    assert meta["creationTimestamp"].endswith("Z") and "." not in meta["creationTimestamp"]
    assert int(meta["resourceVersion"]) > 0
    assert spec["restartPolicy"] == "Always" and spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler" and spec["terminationGracePeriodSeconds"] == 30
    assert spec["enableServiceLinks"] is True and spec["priority"] == 0
    assert spec["containers"][0]["imagePullPolicy"] == "Always"  # no tag
    assert spec["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    assert {t["key"] for t in spec["tolerations"]} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    assert obj["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_status_sent_on_create_is_replaced(api: ApiServerProcess) -> None:
    body = pod("status-reset")
    body["status"] = {"phase": "Running", "podIP": "10.0.0.1"}
    assert created(api, PODS, body)["status"]["phase"] == "Pending"


def test_generate_name(api: ApiServerProcess) -> None:
    body = pod("")
    body["metadata"] = {"generateName": "gen-"}
    name = created(api, PODS, body)["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5


def test_get_missing_and_duplicate_create(api: ApiServerProcess) -> None:
    status, body = api.request("GET", PODS + "/nope")
    assert status == 404 and body["reason"] == "NotFound" and body["message"] == 'pods "nope" not found'
    created(api, PODS, pod("dup"))
    status, body = api.request("POST", PODS, pod("dup"))
    assert status == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'pods "dup" already exists'


def test_create_in_missing_namespace(api: ApiServerProcess) -> None:
    status, body = api.request("POST", "/api/v1/namespaces/ghost/pods", pod("x"))
    assert status == 404 and body["message"] == 'namespaces "ghost" not found'


def test_update_with_stale_resource_version_conflicts(api: ApiServerProcess) -> None:
    obj = created(api, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "upd"}})
    obj["metadata"]["labels"] = {"a": "1"}
    status, fresh = api.request("PUT", "/api/v1/nodes/upd", obj)
    assert status == 200 and fresh["metadata"]["labels"] == {"a": "1"}
    assert int(fresh["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    status, body = api.request("PUT", "/api/v1/nodes/upd", obj)  # obj still has the old resourceVersion
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on nodes "upd": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    # No change, no new revision.
    status, same = api.request("PUT", "/api/v1/nodes/upd", fresh)
    assert status == 200 and same["metadata"]["resourceVersion"] == fresh["metadata"]["resourceVersion"]


def test_update_keeps_status_and_status_update_keeps_spec(api: ApiServerProcess) -> None:
    obj = created(api, PODS, pod("split"))
    obj["status"] = {"phase": "Running"}
    obj["metadata"]["labels"] = {"k": "v"}
    status, updated = api.request("PUT", PODS + "/split", obj)
    assert (
        status == 200
        and updated["status"]["phase"] == "Pending"
        and updated["metadata"]["labels"] == {"k": "v"}
    )
    updated["status"] = {"phase": "Running"}
    updated["spec"]["nodeName"] = "elsewhere"
    status, after = api.request("PUT", PODS + "/split/status", updated)
    assert status == 200 and after["status"]["phase"] == "Running"
    assert "nodeName" not in after["spec"] and after["status"]["qosClass"] == "BestEffort"


def test_label_and_field_selectors(api: ApiServerProcess) -> None:
    api.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sel"}}
    )
    path = "/api/v1/namespaces/sel/pods"
    for name, labels, node in (("a", {"tier": "web"}, "n1"), ("b", {"tier": "db"}, ""), ("c", {}, "n2")):
        body = pod(name, nodeName=node) if node else pod(name)
        body["metadata"]["labels"] = labels
        created(api, path, body)

    def names(query: str) -> list[str]:
        status, body = api.request("GET", f"{path}?{query}")
        assert status == 200, body
        return [item["metadata"]["name"] for item in body["items"]]

    assert names("labelSelector=tier%3Dweb") == ["a"]
    assert names("labelSelector=tier%21%3Dweb") == ["b", "c"]
    assert names("labelSelector=tier+in+(web,db)") == ["a", "b"]
    assert names("labelSelector=!tier") == ["c"]
    assert names("labelSelector=tier") == ["a", "b"]
    assert names("fieldSelector=spec.nodeName%3Dn1") == ["a"]
    assert names("fieldSelector=spec.nodeName%3D") == ["b"]
    assert names("fieldSelector=spec.nodeName%21%3D") == ["a", "c"]
    assert names("fieldSelector=status.phase%21%3DSucceeded,status.phase%21%3DFailed") == ["a", "b", "c"]
    assert names("fieldSelector=metadata.name%3Dc") == ["c"]
    status, body = api.request("GET", f"{path}?fieldSelector=spec.bogus%3D1")
    assert status == 400 and body["message"] == "field label not supported: spec.bogus"


def test_limit_and_continue(api: ApiServerProcess) -> None:
    api.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "page"}}
    )
    path = "/api/v1/namespaces/page/pods"
    for i in range(5):
        created(api, path, pod(f"p{i}"))
    seen: list[str] = []
    query = "limit=2"
    versions = set()
    while True:
        status, body = api.request("GET", f"{path}?{query}")
        assert status == 200
        seen += [item["metadata"]["name"] for item in body["items"]]
        versions.add(body["metadata"]["resourceVersion"])
        token = body["metadata"].get("continue")
        if not token:
            break
        query = f"limit=2&continue={token}"
    assert seen == [f"p{i}" for i in range(5)]
    assert len(versions) == 1  # every page reports the first page's revision
    status, body = api.request("GET", f"{path}?limit=2&continue=garbage")
    assert status == 400


def test_cluster_wide_pod_list(api: ApiServerProcess) -> None:
    status, body = api.request("GET", "/api/v1/pods")
    assert status == 200 and body["kind"] == "PodList"
    assert {item["metadata"]["namespace"] for item in body["items"]} >= {"default"}


@pytest.mark.parametrize(
    ("raw", "status", "fragment"),
    [
        (b"{not json", 400, "json parse error"),
        (b'{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}', 400, "must be of type Pod"),
        (b'{"apiVersion":"v2","kind":"Pod","metadata":{"name":"x"}}', 400, "must be of type Pod"),
        (
            b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":"no"}}',
            400,
            "expected array",
        ),
    ],
)
def test_bad_bodies_get_400(api: ApiServerProcess, raw: bytes, status: int, fragment: str) -> None:
    got, body = api.request("POST", PODS, raw=raw)
    assert got == status and body["kind"] == "Status" and fragment in body["message"], body


def test_unknown_field_strict_is_400_otherwise_dropped_with_warning(api: ApiServerProcess) -> None:
    body = pod("unknown-field")
    body["spec"]["bogus"] = 1
    status, reply = api.request("POST", PODS + "?fieldValidation=Strict", body)
    assert status == 400 and reply["message"] == 'strict decoding error: unknown field "spec.bogus"'
    status, reply = api.request("POST", PODS, body)
    assert status == 201 and "bogus" not in reply["spec"]


def test_huge_body_gets_413_and_server_keeps_serving(api: ApiServerProcess) -> None:
    body = pod("huge")
    body["metadata"]["annotations"] = {"big": "x" * (3 * 1024 * 1024 + 10)}
    status, reply = api.request("POST", PODS, body)
    assert status == 413 and reply["reason"] == "RequestEntityTooLarge"
    assert api.request("GET", "/readyz", token="")[0] == 200


@pytest.mark.parametrize("name", ["Upper", "under_score", "-dash", "a" * 254])
def test_bad_names_get_422(api: ApiServerProcess, name: str) -> None:
    status, body = api.request("POST", PODS, pod(name))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith(f'Pod "{name}" is invalid: metadata.name: Invalid value')


def test_invalid_pod_gets_422_with_kube_message(api: ApiServerProcess) -> None:
    body = pod("bad-cpu", containers=[{"name": "c", "image": "x", "resources": {"limits": {"cpu": "lots"}}}])
    status, reply = api.request("POST", PODS, body)
    assert status == 422 and reply["reason"] == "Invalid"
    assert reply["message"].startswith('Pod "bad-cpu" is invalid: spec.containers[0].resources.limits[cpu]: ')
    assert reply["details"]["causes"][0]["field"] == "spec.containers[0].resources.limits[cpu]"
    missing = pod("no-image", containers=[{"name": "c"}])
    status, reply = api.request("POST", PODS, missing)
    assert status == 422 and "spec.containers[0].image: Required value" in reply["message"]


def test_unknown_resource_and_method(api: ApiServerProcess) -> None:
    status, body = api.request("GET", "/api/v1/configmapz")
    assert status == 404 and body["kind"] == "Status"
    status, body = api.request("POST", PODS + "/x/status", pod("x"))
    assert status == 405


def test_namespace_label_and_deletion(api: ApiServerProcess) -> None:
    ns = created(
        api, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}}
    )
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "gone"}
    assert ns["status"] == {"phase": "Active"}
    created(api, "/api/v1/namespaces/gone/pods", pod("inside"))
    status, _ = api.request("DELETE", "/api/v1/namespaces/gone")
    assert status == 200
    assert api.request("GET", "/api/v1/namespaces/gone/pods/inside")[0] == 404
    status, body = api.request("DELETE", "/api/v1/namespaces/default")
    assert status == 403 and "may not be deleted" in body["message"]


def test_no_token_is_401(api: ApiServerProcess) -> None:
    status, body = api.request("GET", PODS, token="")
    assert status == 401 and body["reason"] == "Unauthorized"


def test_namespaced_writes_need_a_namespace(api: ApiServerProcess) -> None:
    assert api.request("POST", "/api/v1/pods", pod("nowhere"))[0] == 404
    assert api.request("GET", "/api/v1/pods/nowhere")[0] == 404


def test_delete_collection_with_a_label_selector(api: ApiServerProcess) -> None:
    api.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "coll"}}
    )
    path = "/api/v1/namespaces/coll/pods"
    for name, team in (("x1", "a"), ("x2", "a"), ("x3", "b")):
        body = pod(name)
        body["metadata"]["labels"] = {"team": team}
        created(api, path, body)
    status, body = api.request("DELETE", f"{path}?labelSelector=team%3Da")
    assert status == 200 and sorted(item["metadata"]["name"] for item in body["items"]) == ["x1", "x2"]
    _, left = api.request("GET", path)
    assert [item["metadata"]["name"] for item in left["items"]] == ["x3"]


def test_dry_run_validates_but_writes_nothing(api: ApiServerProcess) -> None:
    status, body = api.request("POST", PODS + "?dryRun=All", pod("dry"))
    assert status == 201 and body["metadata"]["name"] == "dry"
    assert api.request("GET", PODS + "/dry")[0] == 404
    obj = created(api, PODS, pod("dry-patch"))
    patch = {"metadata": {"labels": {"x": "y"}}}
    status, body = api.request(
        "PATCH", PODS + "/dry-patch?dryRun=All", patch, content_type="application/merge-patch+json"
    )
    assert status == 200 and body["metadata"]["labels"] == {"x": "y"}
    assert api.request("GET", PODS + "/dry-patch")[1]["metadata"] == obj["metadata"]
    bad = {"spec": {"restartPolicy": "Never"}}
    status, _ = api.request(
        "PATCH", PODS + "/dry-patch?dryRun=All", bad, content_type="application/merge-patch+json"
    )
    assert status == 422
