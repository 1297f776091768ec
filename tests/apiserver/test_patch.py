"""Patch semantics: JSON merge patch, JSON patch, and strategic merge patch with the directives
kubectl and the kubelet send (merge keys, $patch, $setElementOrder, $retainKeys,
$deleteFromPrimitiveList), plus the three content types through the real server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.patch import apply_patch, json_patch, merge_patch
from apiserver.smp import strategic_merge
from apiserver.status import APIError
from harness.apiserver import ApiServerProcess
from tests.apiserver.test_rest import PODS, created, pod

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "app:1",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            },
            {"name": "side", "image": "side:1"},
        ],
        "tolerations": [{"key": "t1", "operator": "Exists"}],
        "volumes": [{"name": "v", "emptyDir": {}}],
    },
    "status": {
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}],
    },
}


def smp(patch: dict[str, Any], original: dict[str, Any] = POD, kind: str = "Pod") -> Any:
    return strategic_merge(copy.deepcopy(original), patch, kind)


def test_merge_patch_null_deletes_and_lists_replace() -> None:
    result = merge_patch(POD, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"tolerations": []}})
    assert result["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert result["spec"]["tolerations"] == []
    assert POD["metadata"]["labels"] == {"a": "1", "b": "2"}  # the original is not touched


def test_json_patch_operations() -> None:
    ops = [
        {"op": "add", "path": "/metadata/labels/c", "value": "3"},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "app:2"},
        {"op": "remove", "path": "/spec/containers/1"},
        {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "t2"}},
        {"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/d"},
        {"op": "move", "from": "/metadata/labels/b", "path": "/metadata/labels/e"},
        {"op": "test", "path": "/metadata/labels/e", "value": "2"},
        {"op": "add", "path": "/metadata/labels/sl~1ash", "value": "s"},
    ]
    result = json_patch(POD, ops)
    assert result["metadata"]["labels"] == {"a": "1", "c": "3", "d": "1", "e": "2", "sl/ash": "s"}
    assert [c["name"] for c in result["spec"]["containers"]] == ["app"]
    assert result["spec"]["containers"][0]["image"] == "app:2"
    assert [t["key"] for t in result["spec"]["tolerations"]] == ["t1", "t2"]


def test_json_patch_failures_are_422() -> None:
    with pytest.raises(APIError) as failed:
        json_patch(POD, [{"op": "test", "path": "/metadata/name", "value": "other"}])
    assert failed.value.code == 422
    with pytest.raises(APIError) as missing:
        json_patch(POD, [{"op": "replace", "path": "/spec/nope/x", "value": 1}])
    assert missing.value.code == 422
    with pytest.raises(APIError) as not_a_list:
        json_patch(POD, {"op": "add"})
    assert not_a_list.value.code == 400


def test_smp_merges_containers_by_name_and_env_by_name() -> None:
    result = smp(
        {"spec": {"containers": [{"name": "app", "image": "app:2", "env": [{"name": "B", "value": "3"}]}]}}
    )
    app, side = result["spec"]["containers"]
    assert app["image"] == "app:2" and side == {"name": "side", "image": "side:1"}
    assert app["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]


def test_smp_replaces_lists_without_a_merge_key() -> None:
    result = smp({"spec": {"tolerations": [{"key": "t2", "operator": "Exists"}]}})
    assert result["spec"]["tolerations"] == [{"key": "t2", "operator": "Exists"}]


def test_smp_merges_conditions_by_type() -> None:
    result = smp(
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]
            }
        }
    )
    assert [(c["type"], c["status"]) for c in result["status"]["conditions"]] == [
        ("Ready", "True"),
        ("PodScheduled", "True"),
        ("Initialized", "True"),
    ]


def test_smp_directives() -> None:
    deleted = smp({"spec": {"containers": [{"name": "side", "$patch": "delete"}]}})
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["app"]
    replaced = smp({"metadata": {"labels": {"$patch": "replace", "only": "this"}}})
    assert replaced["metadata"]["labels"] == {"only": "this"}
    ordered = smp({"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}], "spec": {}})
    assert ordered["spec"]["containers"] == POD["spec"]["containers"]  # directive at the wrong level: no-op
    ordered = smp({"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}]}})
    assert [c["name"] for c in ordered["spec"]["containers"]] == ["side", "app"]
    trimmed = smp({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}})
    assert trimmed["metadata"]["finalizers"] == ["y"]
    added = smp({"metadata": {"finalizers": ["z", "x"]}})
    assert added["metadata"]["finalizers"] == ["x", "y", "z"]
    retained = smp(
        {
            "spec": {
                "volumes": [{"name": "v", "hostPath": {"path": "/d"}, "$retainKeys": ["name", "hostPath"]}]
            }
        }
    )
    assert retained["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/d"}}]
    dropped = smp({"spec": {"tolerations": None}})
    assert "tolerations" not in dropped["spec"]


def test_smp_node_addresses_replace_as_the_kubelet_sends_them() -> None:
    node = {
        "status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n"}]
        }
    }
    patch = {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"$patch": "replace"}]}}
    result = strategic_merge(node, patch, "Node")
    assert result["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.2"}]
    merged = strategic_merge(node, {"status": {"addresses": [{"type": "Hostname", "address": "h"}]}}, "Node")
    assert merged["status"]["addresses"][1] == {"type": "Hostname", "address": "h"}


def test_smp_element_without_merge_key_is_400() -> None:
    with pytest.raises(APIError) as error:
        smp({"spec": {"containers": [{"image": "x"}]}})
    assert error.value.code == 400


def test_unknown_patch_type_is_415() -> None:
    with pytest.raises(APIError) as error:
        apply_patch("application/x-unknown-patch", POD, {}, "Pod")
    assert error.value.code == 415


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/merge-patch+json", {"metadata": {"labels": {"via": "merge"}}}),
        ("application/strategic-merge-patch+json", {"metadata": {"labels": {"via": "merge"}}}),
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/metadata/labels", "value": {"via": "merge"}}],
        ),
    ],
)
def test_patch_content_types_through_the_server(api: ApiServerProcess, content_type: str, body: Any) -> None:
    name = f"patch-{content_type.split('/')[1].split('-')[0]}"
    created(api, PODS, pod(name))
    status, result = api.request("PATCH", f"{PODS}/{name}", body, content_type=content_type)
    assert status == 200, result
    assert result["metadata"]["labels"] == {"via": "merge"}


def test_patch_with_stale_resource_version_conflicts(api: ApiServerProcess) -> None:
    created(api, PODS, pod("patch-rv"))
    patch = {"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}}
    status, body = api.request(
        "PATCH", PODS + "/patch-rv", patch, content_type="application/merge-patch+json"
    )
    assert status == 409 and body["reason"] == "Conflict"
    assert api.request("PATCH", PODS + "/missing", {}, content_type="application/merge-patch+json")[0] == 404
