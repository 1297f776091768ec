"""Bodies other than plain JSON: kubectl's protobuf (create namespace, drain's evictions), YAML,
and server-side apply (application/apply-patch+yaml)."""

from __future__ import annotations

import subprocess

from apiserver.protobody import decode
from harness.apiserver import REPO, ApiServerProcess
from tests.apiserver.test_rest import PODS, created, pod

MAGIC = b"k8s\x00"


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_protobuf_eviction_decodes() -> None:
    meta = _field(1, b"p1") + _field(3, b"default")
    options = bytes([1 << 3, 7])  # gracePeriodSeconds: 7
    eviction = _field(1, meta) + _field(2, options)
    type_meta = _field(1, b"policy/v1") + _field(2, b"Eviction")
    body = MAGIC + _field(1, type_meta) + _field(2, eviction)
    assert decode(body) == {
        "kind": "Eviction",
        "apiVersion": "policy/v1",
        "metadata": {"name": "p1", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 7},  # as Go's JSON has it: no TypeMeta
    }


def test_kubectl_create_namespace_sends_protobuf(api: ApiServerProcess) -> None:
    result = subprocess.run(
        [
            str(REPO / ".venv/bin/kubectl"),
            "--kubeconfig",
            str(api.kubeconfig),
            "create",
            "namespace",
            "from-kubectl",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    status, ns = api.request("GET", "/api/v1/namespaces/from-kubectl")
    assert status == 200 and ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "from-kubectl"}


def test_protobuf_pod_is_read_and_unknown_kind_is_415(api: ApiServerProcess) -> None:
    type_meta = _field(1, b"v1") + _field(2, b"Pod")
    body = MAGIC + _field(1, type_meta) + _field(2, _field(1, _field(1, b"empty")))
    status, reply = api.request("POST", PODS, raw=body, content_type="application/vnd.kubernetes.protobuf")
    assert status == 422 and "containers" in reply["message"], reply  # read, then invalid: no containers
    type_meta = _field(1, b"v1") + _field(2, b"Frobnicator")
    body = MAGIC + _field(1, type_meta) + _field(2, b"")
    status, reply = api.request("POST", PODS, raw=body, content_type="application/vnd.kubernetes.protobuf")
    assert status == 415 and "read only for" in reply["message"]


def test_yaml_body(api: ApiServerProcess) -> None:
    body = b"apiVersion: v1\nkind: Pod\n"
    body += b"metadata: {name: from-yaml}\nspec: {containers: [{name: c, image: i}]}"
    status, reply = api.request("POST", PODS, raw=body, content_type="application/yaml")
    assert status == 201 and reply["metadata"]["name"] == "from-yaml"


def test_server_side_apply_creates_then_merges(api: ApiServerProcess) -> None:
    path = PODS + "/applied?fieldManager=test"
    applied = pod("applied")
    applied["metadata"]["labels"] = {"a": "1"}
    status, first = api.request("PATCH", path, applied, content_type="application/apply-patch+yaml")
    assert status == 201 and first["metadata"]["labels"] == {"a": "1"}
    applied["metadata"]["labels"] = {"b": "2"}
    applied["spec"]["containers"][0]["image"] = "busybox:2"
    status, second = api.request("PATCH", path, applied, content_type="application/apply-patch+yaml")
    assert status == 200 and second["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert second["spec"]["containers"][0]["image"] == "busybox:2"
    status, reply = api.request(
        "PATCH", PODS + "/applied", applied, content_type="application/apply-patch+yaml"
    )
    assert status == 422 and "fieldManager: Required value" in reply["message"]
    created(api, PODS, pod("plain"))
