"""The official `kubernetes` Python client (37.x) against the real `kubenode apiserver` over TLS.

One server for the module; each test uses its own namespace or object names.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config, dynamic, watch
from kubernetes.client.exceptions import ApiException

from harness.apiserver import ApiServerProcess


def api_client(kubeconfig: Any) -> Any:
    """The client's models type every field Optional; the tests read them as Any."""
    return config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]


@pytest.fixture(scope="module")
def core(api: ApiServerProcess) -> Iterator[Any]:
    with api_client(api.kubeconfig) as c:
        yield client.CoreV1Api(c)


def pod(name: str, node: str = "", labels: dict[str, str] | None = None) -> Any:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {"app": name}),
        spec=client.V1PodSpec(
            node_name=node or None,
            containers=[client.V1Container(name="main", image="busybox:1", command=["sleep", "60"])],
        ),
    )


def namespace(core: Any, name: str) -> str:
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def test_crud_with_server_defaults_and_selectors(core: Any) -> None:
    ns = namespace(core, "py-crud")
    created = core.create_namespaced_pod(ns, pod("a", labels={"app": "x", "tier": "web"}))
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    assert created.spec.restart_policy == "Always" and created.spec.scheduler_name == "default-scheduler"
    assert created.status.phase == "Pending" and created.status.qos_class == "BestEffort"
    core.create_namespaced_pod(ns, pod("b", labels={"app": "x", "tier": "db"}))
    listed = core.list_namespaced_pod(ns, label_selector="app=x,tier!=db")
    assert [p.metadata.name for p in listed.items] == ["a"]
    assert core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items
    patched = core.patch_namespaced_pod("a", ns, {"metadata": {"labels": {"tier": "api"}}})
    assert patched.metadata.labels == {"app": "x", "tier": "api"}
    # A list body goes as application/json-patch+json.
    ops = [{"op": "add", "path": "/metadata/annotations", "value": {"owner": "py"}}]
    assert core.patch_namespaced_pod("a", ns, ops).metadata.annotations == {"owner": "py"}
    stale = core.read_namespaced_pod("a", ns)
    stale.metadata.resource_version = created.metadata.resource_version
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_pod("a", ns, stale)
    assert conflict.value.status == 409
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("nope", ns)
    assert missing.value.status == 404 and 'pods \\"nope\\" not found' in (missing.value.body or "")
    core.delete_namespaced_pod("b", ns)
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["a"]


def test_delete_answers_as_kube_does_per_kind(core: Any) -> None:
    """Services and ServiceAccounts (ReturnDeletedObject in kube's registry) answer the deleted object, which
    the client decodes as V1Service/V1ServiceAccount; a ConfigMap answers a Status (its OpenAPI: Status)."""
    ns = namespace(core, "py-deletes")
    core.create_namespaced_service(ns, {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
    service = core.delete_namespaced_service("s", ns)
    assert type(service).__name__ == "V1Service"
    assert service.metadata.name == "s" and service.spec.ports
    core.create_namespaced_service_account(ns, {"metadata": {"name": "sa"}})
    account = core.delete_namespaced_service_account("sa", ns)
    assert type(account).__name__ == "V1ServiceAccount" and account.metadata.name == "sa"
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
    status = core.delete_namespaced_config_map("cm", ns)
    assert status["kind"] == "Status" and status["status"] == "Success"


def test_watch_stream_resumes_from_a_resource_version(core: Any) -> None:
    ns = namespace(core, "py-watch")
    core.create_namespaced_pod(ns, pod("before"))
    rv = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod("after-1"))
    core.patch_namespaced_pod("before", ns, {"metadata": {"labels": {"changed": "yes"}}})
    core.create_namespaced_pod(ns, pod("after-2"))
    seen: list[tuple[str, str]] = []
    w: Any = watch.Watch()  # type: ignore[no-untyped-call]
    for event in w.stream(core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 3:
            w.stop()
    assert seen == [("ADDED", "after-1"), ("MODIFIED", "before"), ("ADDED", "after-2")]
    assert w.resource_version  # the client tracks where to resume from


def test_binding_and_node_status_writes(api: ApiServerProcess, core: Any) -> None:
    ns = namespace(core, "py-bind")
    core.create_namespaced_pod(ns, pod("bound"))
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="bound"),
        target=client.V1ObjectReference(kind="Node", name="py-node"),
    )
    with api_client(api.kubeconfig_for("system:kube-scheduler")) as sched_client:
        scheduler: Any = client.CoreV1Api(sched_client)
        # The binding reply is Status{Success}; the client cannot map it to V1Binding, so read it raw.
        reply = scheduler.create_namespaced_pod_binding("bound", ns, body, _preload_content=False)
        assert reply.status == 201
        with pytest.raises(ApiException) as again:
            scheduler.create_namespaced_pod_binding("bound", ns, body, _preload_content=False)
        assert again.value.status == 409
        with pytest.raises(ApiException) as denied:
            scheduler.create_namespaced_pod(ns, pod("not-mine"))
        assert denied.value.status == 403
    bound = core.read_namespaced_pod("bound", ns)
    assert bound.spec.node_name == "py-node"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
    core.create_namespaced_pod(ns, pod("elsewhere", node="other-node"))
    with api_client(api.kubeconfig_for("system:node:py-node", ["system:nodes"])) as node_client:
        node: Any = client.CoreV1Api(node_client)
        status = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
        assert node.patch_namespaced_pod_status("bound", ns, status).status.phase == "Running"
        with pytest.raises(ApiException) as forbidden:
            node.patch_namespaced_pod_status("elsewhere", ns, status)
        assert forbidden.value.status == 403
        assert "can only update pod status for pods with spec.nodeName set to itself" in (
            forbidden.value.body or ""
        )


def test_leases_with_microtime_and_events(core: Any, api: ApiServerProcess) -> None:
    with api_client(api.kubeconfig) as c:
        coordination: Any = client.CoordinationV1Api(c)
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)  # .000000: MicroTime must keep six digits
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name="py-lease", namespace="kube-node-lease"),
            spec=client.V1LeaseSpec(holder_identity="py-node", lease_duration_seconds=40, renew_time=now),
        )
        created = coordination.create_namespaced_lease("kube-node-lease", lease)
        assert created.spec.renew_time == now
        created.spec.renew_time = now + dt.timedelta(seconds=10)
        renewed = coordination.replace_namespaced_lease("py-lease", "kube-node-lease", created)
        assert renewed.metadata.resource_version != created.metadata.resource_version
        with pytest.raises(ApiException) as stale:
            coordination.replace_namespaced_lease("py-lease", "kube-node-lease", created)
        assert stale.value.status == 409
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="py-node.1", namespace="default"),
        involved_object=client.V1ObjectReference(kind="Node", name="py-node", uid="py-node"),
        reason="NodeReady",
        message="Node py-node status is now: NodeReady",
        type="Normal",
        source=client.V1EventSource(component="kubelet", host="py-node"),
        first_timestamp=dt.datetime.now(dt.UTC),
        last_timestamp=dt.datetime.now(dt.UTC),
        count=1,
    )
    core.create_namespaced_event("default", event)
    found = core.list_event_for_all_namespaces(
        field_selector="involvedObject.kind=Node,involvedObject.name=py-node"
    )
    assert [e.reason for e in found.items] == ["NodeReady"]


def test_discovery_through_the_client(api: ApiServerProcess) -> None:
    with api_client(api.kubeconfig) as c:
        assert client.VersionApi(c).get_code().git_version.startswith("v1.37")
        groups = client.ApisApi(c).get_api_versions()
        assert [g.name for g in groups.groups] == [
            "events.k8s.io",
            "coordination.k8s.io",
            "node.k8s.io",
            "topology.node.k8s.io",
            "apps",
            "batch",
            "resource.k8s.io",
            "rbac.authorization.k8s.io",
            "policy",
            "storage.k8s.io",
            "autoscaling",
            "discovery.k8s.io",
            "networking.k8s.io",
            "certificates.k8s.io",
            "storagemigration.k8s.io",
            "admissionregistration.k8s.io",
            "scheduling.k8s.io",
            "metrics.k8s.io",
        ]
        resources = client.CoreV1Api(c).get_api_resources()
        assert {r.name for r in resources.resources} >= {
            "pods",
            "pods/status",
            "pods/binding",
            "nodes",
            "events",
        }
        # The dynamic client builds its resource map from the same discovery documents.
        dyn: Any = dynamic.DynamicClient(c)  # type: ignore[no-untyped-call]
        leases = dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
        assert leases.namespaced and leases.get(namespace="kube-node-lease").kind == "LeaseList"
