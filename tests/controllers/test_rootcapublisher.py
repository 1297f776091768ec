"""The root CA publisher on real processes (API server and `kubenode controller-manager`, no nodes):
`kube-root-ca.crt` holds the CA that verifies the API server in every namespace, one made later
included; a deleted one is made again and an edited one is put back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controllers.resources import CONFIGMAPS
from harness.apiserver import ApiServerProcess
from tests.controllers.cluster import Cluster, wait_for

NAME = "kube-root-ca.crt"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with ApiServerProcess() as api:
        made = Cluster(api, scheduler=False)
        try:
            yield made
        finally:
            made.close()


def root_ca(cluster: Cluster, namespace: str) -> Any:
    items = cluster.client.list(CONFIGMAPS, namespace, field_selector=f"metadata.name={NAME}")["items"]
    return items[0] if items else None


def test_every_namespace_gets_the_ca_and_keeps_it(cluster: Cluster) -> None:
    ca = cluster.api.ca_file.read_text()
    for namespace in ("default", "kube-system", "kube-public", "kube-node-lease"):
        published = wait_for(lambda: root_ca(cluster, namespace), 30, f"{NAME} in {namespace}")  # noqa: B023
        assert published["data"] == {"ca.crt": ca}
        assert published["metadata"]["annotations"]["kubernetes.io/description"].startswith(
            "Contains a CA bundle that can be used to verify the kube-apiserver"
        )
    cluster.out("create", "namespace", "team-b")
    assert wait_for(lambda: root_ca(cluster, "team-b"), 30, f"{NAME} in team-b")["data"] == {"ca.crt": ca}
    cluster.out("delete", "configmap", NAME, "-n", "team-b")
    wait_for(lambda: root_ca(cluster, "team-b"), 30, f"{NAME} made again")
    cluster.out("patch", "configmap", NAME, "-n", "team-b", "-p", '{"data":{"ca.crt":"forged"}}')
    wait_for(lambda: (root_ca(cluster, "team-b") or {}).get("data") == {"ca.crt": ca}, 30, "the CA put back")
