"""Discovery: the legacy documents kubectl and the Python client read, built from the resource registry and
served by the real server (/apis must never fail; trailing slashes as the Python client sends them)."""

from __future__ import annotations

from apiserver.discovery import api_groups, api_resources
from apiserver.resources import SERVED
from harness.apiserver import ApiServerProcess


def test_discovery_documents() -> None:
    core = api_resources("", "v1", SERVED)
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["categories"] == ["all"]
    assert by_name["pods"]["verbs"] == sorted(
        ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    )
    assert by_name["pods/binding"]["kind"] == "Binding" and by_name["pods/binding"]["verbs"] == ["create"]
    eviction = by_name["pods/eviction"]
    assert (eviction["group"], eviction["version"], eviction["kind"]) == ("policy", "v1", "Eviction")
    assert by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert {by_name[n]["shortNames"][0] for n in ("nodes", "namespaces", "events")} == {"no", "ns", "ev"}
    assert not by_name["nodes"]["namespaced"]
    groups = api_groups(SERVED)["groups"]
    assert [g["name"] for g in groups] == [
        "events.k8s.io", "coordination.k8s.io", "node.k8s.io", "topology.node.k8s.io", "apps", "batch",
        "resource.k8s.io",
        "rbac.authorization.k8s.io", "policy", "storage.k8s.io", "autoscaling", "discovery.k8s.io",
        "networking.k8s.io", "certificates.k8s.io", "storagemigration.k8s.io", "admissionregistration.k8s.io",
        "scheduling.k8s.io",
    ]  # fmt: skip
    assert groups[1]["preferredVersion"] == {"groupVersion": "coordination.k8s.io/v1", "version": "v1"}
    leases = api_resources("coordination.k8s.io", "v1", SERVED)
    assert leases["groupVersion"] == "coordination.k8s.io/v1" and leases["resources"][0]["kind"] == "Lease"
    topology = api_resources("topology.node.k8s.io", "v1alpha2", SERVED)["resources"]
    assert [(r["name"], r["kind"], r["namespaced"]) for r in topology] == [
        ("noderesourcetopologies", "NodeResourceTopology", False)
    ]


def test_served_discovery_and_version(api: ApiServerProcess) -> None:
    status, versions = api.request("GET", "/api")
    assert status == 200 and versions["kind"] == "APIVersions" and versions["versions"] == ["v1"]
    assert versions["serverAddressByClientCIDRs"][0]["clientCIDR"] == "0.0.0.0/0"
    for path in ("/apis", "/apis/"):
        status, groups = api.request("GET", path)
        assert status == 200 and groups["kind"] == "APIGroupList", path
    for path in ("/api/v1", "/api/v1/", "/apis/coordination.k8s.io/v1/"):
        status, listed = api.request("GET", path)
        assert status == 200 and listed["kind"] == "APIResourceList", path
    status, group = api.request("GET", "/apis/coordination.k8s.io")
    assert status == 200 and group["kind"] == "APIGroup" and group["preferredVersion"]["version"] == "v1"
    status, missing = api.request("GET", "/apis/apps/v2")
    assert status == 404 and missing["kind"] == "Status" and missing["reason"] == "NotFound"
    status, version = api.request("GET", "/version", token="")  # kube leaves /version to everyone
    assert status == 200 and (version["major"], version["minor"]) == ("1", "37")
    assert api.request("GET", "/apis", token="")[0] == 401
