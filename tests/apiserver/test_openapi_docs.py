"""The OpenAPI documents: generated schemas, GVK extensions, merge keys, and PATCH with fieldValidation."""

from __future__ import annotations

from typing import Any

import kubernetes.client.models as models

from apiserver import protowire
from apiserver.openapi import v2_document, v3_document
from apiserver.openapi_v2pb import encode_document
from apiserver.resources import SERVED

POD = "io.k8s.api.core.v1.Pod"


def resolve(schemas: dict[str, Any], prop: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref") or (prop.get("allOf") or [{}])[0].get("$ref", "")
    return schemas[ref.rsplit("/", 1)[1]] if ref else prop


def test_v3_core_document_covers_the_served_kinds() -> None:
    doc = v3_document("", "v1", SERVED)
    schemas = doc["components"]["schemas"]
    for kind in ("Pod", "PodList", "Node", "Namespace", "Event", "Binding"):
        gvk = schemas[f"io.k8s.api.core.v1.{kind}"]["x-kubernetes-group-version-kind"]
        assert gvk == [{"group": "", "version": "v1", "kind": kind}]
    assert schemas["io.k8s.api.policy.v1.Eviction"]["x-kubernetes-group-version-kind"][0]["group"] == "policy"
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    # generated, not hand-written: every field of the client's model is there, under its JSON name
    spec = schemas["io.k8s.api.core.v1.PodSpec"]
    assert set(spec["properties"]) == set(models.V1PodSpec.attribute_map.values())
    assert "containers" in spec["required"]
    containers = spec["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert (
        "tolerations" in spec["properties"]
        and "x-kubernetes-patch-merge-key" not in spec["properties"]["tolerations"]
    )
    container = schemas["io.k8s.api.core.v1.Container"]["properties"]
    assert container["env"]["x-kubernetes-patch-merge-key"] == "name"
    assert container["ports"]["x-kubernetes-patch-merge-key"] == "containerPort"
    meta = resolve(schemas, schemas[POD]["properties"]["metadata"])
    assert meta["properties"]["creationTimestamp"]["format"] == "date-time"
    status = resolve(schemas, schemas[POD]["properties"]["status"])
    assert status["properties"]["conditions"]["x-kubernetes-patch-merge-key"] == "type"


def test_patch_operations_let_kubectl_skip_client_side_validation() -> None:
    """kubectl's query-param verifier: a PATCH of the GVK with a `fieldValidation` query parameter."""
    for group, version, kind, path in [
        ("", "v1", "Pod", "/api/v1/namespaces/{namespace}/pods/{name}"),
        ("", "v1", "Node", "/api/v1/nodes/{name}"),
        (
            "coordination.k8s.io",
            "v1",
            "Lease",
            "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
        ),
    ]:
        patch = v3_document(group, version, SERVED)["paths"][path]["patch"]
        assert patch["x-kubernetes-group-version-kind"] == {"group": group, "version": version, "kind": kind}
        assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in patch["parameters"])
        assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    paths = v3_document("", "v1", SERVED)["paths"]
    assert "post" in paths["/api/v1/namespaces/{namespace}/pods/{name}/binding"]
    assert "patch" in paths["/api/v1/nodes/{name}/status"]


def test_v2_document_is_swagger() -> None:
    doc = v2_document(SERVED)
    assert doc["swagger"] == "2.0"
    assert "io.k8s.api.coordination.v1.Lease" in doc["definitions"]
    ref = doc["paths"]["/api/v1/nodes/{name}"]["get"]["responses"]["200"]["schema"]["$ref"]
    assert ref == "#/definitions/io.k8s.api.core.v1.Node"


def test_v2_protobuf_carries_the_definitions() -> None:
    """gnostic's Document: definitions = 9 {NamedSchema 1 {name 1, Schema 2 {vendor_extension 31}}}."""
    body = encode_document(v2_document(SERVED))
    assert protowire.string(body, 1) == "2.0"
    named = {
        protowire.string(e, 1): protowire.message(e, 2)
        for e in protowire.repeated(protowire.message(body, 9), 1)
    }
    pod = named["io.k8s.api.core.v1.Pod"]
    extensions = {protowire.string(e, 1): protowire.message(e, 2) for e in protowire.repeated(pod, 31)}
    gvk_yaml = protowire.string(extensions["x-kubernetes-group-version-kind"], 2)
    assert "kind: Pod" in gvk_yaml and "version: v1" in gvk_yaml
    spec = named["io.k8s.api.core.v1.PodSpec"]
    properties = {protowire.string(e, 1) for e in protowire.repeated(protowire.message(spec, 25), 1)}
    assert {"containers", "nodeName", "tolerations"} <= properties
