"""NodeResourceTopology (topology.node.k8s.io/v1alpha2) through the real server: the official
client's CustomObjectsApi, discovery, kubectl's table, and the body checks a CRD schema would make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness.apiserver import ApiServerProcess
from tests.apiserver.conftest import python_client
from tests.apiserver.kubectl_support import Kubectl

GROUP, VERSION, PLURAL = "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies"


def nrt(name: str, available: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "topologyPolicies": ["SingleNUMANodeContainerLevel"],
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "container"},
        ],
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "costs": [{"name": "node-0", "value": 10 if i == 0 else 20}],
                "resources": [
                    {
                        "name": "kubenode.io/gpu",
                        "capacity": "2",
                        "allocatable": "2",
                        "available": str(available),
                    }
                ],
            }
            for i in (0, 1)
        ],
    }


@pytest.fixture(scope="module")
def api(own_api: ApiServerProcess) -> ApiServerProcess:
    return own_api  # not the package's shared server: `kubectl get pods` here expects this module's pods only


@pytest.fixture(scope="module")
def custom(api: ApiServerProcess) -> Any:
    return client.CustomObjectsApi(python_client(str(api.kubeconfig)))


def test_create_get_list_replace_delete(custom: Any) -> None:
    created = custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, nrt("n1"))
    assert created["metadata"]["uid"] and created["kind"] == "NodeResourceTopology"
    got = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "n1")
    assert got["zones"][1]["resources"][0]["available"] == "1"
    got["zones"][1]["resources"][0]["available"] = "0"
    replaced = custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "n1", got)
    assert replaced["zones"][1]["resources"][0]["available"] == "0"
    listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["n1"]
    custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "n1")
    assert custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"] == []


def test_bad_bodies(custom: Any) -> None:
    wrong_type = nrt("bad")
    wrong_type["zones"][0]["resources"] = {"name": "x"}
    with pytest.raises(ApiException) as bad:
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, wrong_type)
    assert bad.value.status == 400 and "zones[0].resources" in (bad.value.body or "")
    no_type = nrt("bad")
    del no_type["zones"][1]["type"]
    no_type["zones"][0]["resources"][0]["available"] = "lots"
    with pytest.raises(ApiException) as invalid:
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, no_type)
    body = invalid.value.body or ""
    assert (
        invalid.value.status == 422 and "zones[1].type" in body and "zones[0].resources[0].available" in body
    )


def test_discovery_and_kubectl_table(api: ApiServerProcess, custom: Any, tmp_path: Path) -> None:
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, nrt("n2"))
    kubectl = Kubectl(api.kubeconfig, tmp_path / "cache")
    resources = kubectl.out("api-resources", "--api-group", GROUP)
    assert "noderesourcetopologies" in resources and "node-res-topo" in resources
    table = kubectl.out("get", "node-res-topo")
    assert table.split("\n")[0].split() == ["NAME", "POLICY", "SCOPE", "ZONES", "AGE"]
    assert table.split("\n")[1].split()[:4] == ["n2", "single-numa-node", "container", "node-0,node-1"]
    assert 'available: "1"' in kubectl.out("get", "noderesourcetopology", "n2", "-o", "yaml")
    # The documented kinds' OpenAPI is untouched: kubectl still validates pods.
    assert kubectl.out("get", "pods", "-A", "-o", "name") == ""
