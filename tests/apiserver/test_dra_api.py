"""resource.k8s.io/v1 on the real server: the real kubectl's apply (client-side and server-side), get with
kube's columns, describe and explain; the official client's ResourceV1Api with the claim's status
subresource; kube's validation with CEL compiled at create and update (422 naming the field); immutable
claim specs; the ResourceSlice field selectors; the pod's DRA fields kept as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess
from tests.apiserver.conftest import python_client
from tests.apiserver.kubectl_support import Kubectl

OBJECTS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpu}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: a100}}
    capacity: {memory: {value: 40Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: big-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors:
          - cel:
              expression: "device.capacity['gpu.example.com'].memory.compareTo(quantity('32Gi')) >= 0"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
"""

BAD_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: broken}
spec:
  selectors: [{cel: {expression: "device.driver =="}}]
"""


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "cache")


@pytest.fixture(scope="module")
def resource_api(api: ApiServerProcess) -> Any:
    from kubernetes import client

    return client.ResourceV1Api(python_client(str(api.kubeconfig)))


def test_kubectl_apply_get_describe(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "dra.yaml"
    manifest.write_text(OBJECTS)
    kubectl.out("apply", "-f", str(manifest))
    table = kubectl.out("get", "resourceclaims,resourceslices,deviceclasses,resourceclaimtemplates")
    assert "resourceclaim.resource.k8s.io/one-gpu" in table and "pending" in table
    assert "resourceslice.resource.k8s.io/node-a-gpu" in table
    assert "deviceclass.resource.k8s.io/gpu.example.com" in table
    assert "resourceclaimtemplate.resource.k8s.io/big-gpu" in table
    slices = kubectl.out("get", "resourceslices").split("\n")
    assert slices[0].split() == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert slices[1].split()[:4] == ["node-a-gpu", "node-a", "gpu.example.com", "node-a"]
    claims = kubectl.out("get", "resourceclaims").split("\n")
    assert claims[0].split() == ["NAME", "STATE", "AGE"] and claims[1].split()[:2] == ["one-gpu", "pending"]
    described = kubectl.out("describe", "resourceclaim", "one-gpu")
    assert "Name:" in described and "one-gpu" in described and "gpu.example.com" in described
    # Applying the same file again changes nothing; server-side apply takes it too.
    assert "unchanged" in kubectl.out("apply", "-f", str(manifest))
    kubectl.out("apply", "--server-side", "-f", str(manifest))
    assert "ResourceClaim" in kubectl.out("explain", "resourceclaims.spec.devices")
    on_a = kubectl.out("get", "resourceslices", "--field-selector", "spec.nodeName=node-a", "-o", "name")
    assert on_a.split() == ["resourceslice.resource.k8s.io/node-a-gpu"]
    assert (
        kubectl.out("get", "resourceslices", "--field-selector", "spec.nodeName=node-b", "-o", "name") == ""
    )


def test_selector_that_does_not_compile_is_422_naming_the_field(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(BAD_CLASS)
    result = kubectl.run("apply", "-f", str(manifest), check=False)
    assert result.returncode != 0
    assert 'The DeviceClass "broken" is invalid' in result.stderr
    assert 'spec.selectors[0].cel.expression: Invalid value: "device.driver ==": compilation failed' in (
        result.stderr
    )
    not_bool = BAD_CLASS.replace('"device.driver =="', '"device.attributes.size()"')
    manifest.write_text(not_bool)
    result = kubectl.run("apply", "-f", str(manifest), check=False)
    assert "must evaluate to bool" in result.stderr


def test_client_status_subresource_and_immutable_spec(resource_api: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "status-claim"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}},
        "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]},
    }
    created = resource_api.create_namespaced_resource_claim("default", claim)
    assert created.status is None  # status is written through /status only
    allocation = {
        "devices": {"results": [{"request": "r", "driver": "x", "pool": "n", "device": "d0"}]},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
            ]
        },
    }
    patched = resource_api.patch_namespaced_resource_claim_status(
        "status-claim",
        "default",
        {
            "status": {
                "allocation": allocation,
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}],
            }
        },
    )
    assert patched.status.allocation.devices.results[0].device == "d0"
    assert patched.status.reserved_for[0].uid == "u1"
    with pytest.raises(ApiException) as error:
        resource_api.patch_namespaced_resource_claim(
            "status-claim", "default", {"spec": {"devices": {"requests": [{"name": "other"}]}}}
        )
    assert error.value.status == 422
    assert "field is immutable" in json.loads(str(error.value.body))["message"]
    bad = {**claim, "metadata": {"name": "bad-claim"}}
    bad["spec"] = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x",
        "selectors": [{"cel": {"expression": "device.driver =="}}]}}]}}  # fmt: skip
    with pytest.raises(ApiException) as error:
        resource_api.create_namespaced_resource_claim("default", bad)
    assert error.value.status == 422
    body = json.loads(str(error.value.body))
    assert (
        body["details"]["causes"][0]["field"]
        == "spec.devices.requests[0].exactly.selectors[0].cel.expression"
    )
    resource_api.delete_namespaced_resource_claim("status-claim", "default")


def test_pod_dra_fields_are_kept(core: Any) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dra-pod"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "big-gpu"}],
            "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    created = core.create_namespaced_pod("default", pod)
    assert created.spec.resource_claims[0].resource_claim_template_name == "big-gpu"
    assert created.spec.containers[0].resources.claims[0].name == "gpu"
    status = {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "dra-pod-gpu-x"}]}}
    patched = core.patch_namespaced_pod_status("dra-pod", "default", status)
    assert patched.status.resource_claim_statuses[0].resource_claim_name == "dra-pod-gpu-x"
    core.delete_namespaced_pod("dra-pod", "default", grace_period_seconds=0)


def test_kube_limits_names_and_immutable_slices(resource_api: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    def causes(call: Any, *args: Any) -> list[tuple[str, str]]:
        with pytest.raises(ApiException) as error:
            call(*args)
        assert error.value.status == 422
        body = json.loads(str(error.value.body))
        return [(c["field"], c["message"]) for c in body["details"]["causes"]]

    request = {"name": "gpu", "exactly": {"deviceClassName": "x"}}
    claim = {"metadata": {"name": "dup"}, "spec": {"devices": {"requests": [request, request]}}}
    assert causes(resource_api.create_namespaced_resource_claim, "default", claim) == [
        ("spec.devices.requests[1].name", 'Duplicate value: "gpu"')
    ]
    bad_name = {**request, "name": "GPU"}
    claim["spec"] = {"devices": {"requests": [bad_name]}}
    [(field, message)] = causes(resource_api.create_namespaced_resource_claim, "default", claim)
    assert field == "spec.devices.requests[0].name" and message.startswith(
        'Invalid value: "GPU": a lowercase RFC 1123 label'
    )
    devices = [{"name": f"d{i}"} for i in range(129)]
    pool = {"name": "n", "generation": 1, "resourceSliceCount": 1}
    spec: dict[str, Any] = {"driver": "x.example.com", "nodeName": "n", "pool": pool, "devices": devices}
    too_big = {"metadata": {"name": "big"}, "spec": spec}
    assert causes(resource_api.create_resource_slice, too_big) == [
        ("spec.devices", "Too many: 129: must have at most 128 items")
    ]
    spec["devices"] = devices[:2]
    resource_api.create_resource_slice(too_big)
    moved = [{"op": "replace", "path": "/spec/nodeName", "value": "elsewhere"}]
    assert causes(resource_api.patch_resource_slice, "big", moved) == [
        ("spec.nodeName", 'Invalid value: "elsewhere": field is immutable')
    ]
    resource_api.delete_resource_slice("big")


def test_pod_claim_fields_are_validated_as_kube_does(core: Any) -> None:
    from kubernetes.client.exceptions import ApiException

    def causes(spec: dict[str, Any]) -> list[tuple[str, str]]:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad-claims"}, "spec": spec}
        with pytest.raises(ApiException) as error:
            core.create_namespaced_pod("default", pod)
        assert error.value.status == 422
        return [(c["field"], c["message"]) for c in json.loads(str(error.value.body))["details"]["causes"]]

    container = {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
    assert causes({"containers": [container]}) == [(
        "spec.containers[0].resources.claims[0]",
        'Not found: "gpu": must be one of the names in pod.spec.resourceClaims which is empty',
    )]  # fmt: skip
    both = {"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}
    twice = {"name": "gpu", "resourceClaimName": "a"}
    found = causes({"containers": [container], "resourceClaims": [both, twice]})
    assert found == [
        (
            "spec.resourceClaims[0]",
            "Invalid value: at most one of `resourceClaimName` or `resourceClaimTemplateName` may be "
            "specified",
        ),
        ("spec.resourceClaims[1].name", 'Duplicate value: "gpu"'),
    ]
    neither = {"name": "gpu"}
    assert causes({"containers": [container], "resourceClaims": [neither]}) == [
        (
            "spec.resourceClaims[0]",
            "Invalid value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
        )
    ]


def test_the_official_client_deletes_each_dra_kind(resource_api: Any) -> None:
    """kube's resource.k8s.io registries set ReturnDeletedObject: a DELETE answers the object, which the
    generated delete_* methods decode as their kind (a Status would fail the model's required spec)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    request = {"name": "gpu", "exactly": {"deviceClassName": "del.example.com"}}
    claim_spec = {"devices": {"requests": [request]}}
    pool = {"name": "del-node", "generation": 1, "resourceSliceCount": 1}
    slice_spec = {
        "driver": "del.example.com",
        "nodeName": "del-node",
        "pool": pool,
        "devices": [{"name": "d0"}],
    }
    kinds: list[tuple[str, str | None, dict[str, Any], type[Any]]] = [
        ("device_class", None, {}, client.V1DeviceClass),
        ("resource_slice", None, slice_spec, client.V1ResourceSlice),
        ("namespaced_resource_claim", "default", claim_spec, client.ResourceV1ResourceClaim),
        (
            "namespaced_resource_claim_template",
            "default",
            {"spec": claim_spec},
            client.V1ResourceClaimTemplate,
        ),
    ]
    for suffix, namespace, spec, model in kinds:
        name = f"deleted-{suffix.replace('_', '-')}"
        body = {"metadata": {"name": name}, "spec": spec}
        where = (namespace,) if namespace else ()
        created = getattr(resource_api, f"create_{suffix}")(*where, body)
        deleted = getattr(resource_api, f"delete_{suffix}")(name, *where)
        assert isinstance(deleted, model), suffix
        assert deleted.metadata.name == name and deleted.metadata.uid == created.metadata.uid
        with pytest.raises(ApiException) as gone:
            getattr(resource_api, f"read_{suffix}")(name, *where)
        assert gone.value.status == 404, suffix
