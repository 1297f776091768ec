"""What the real kube-scheduler v1.37 needed of `kubenode apiserver` (interop/tests/
test_kube_control_plane_on_kubenode_apiserver.py runs the binary; these need no Go binaries):

- kube's bootstrap RBAC for system:kube-scheduler and system:volume-scheduler, including the kinds it informs
  on that kubenode's own components never use (a 403 there keeps its informers from syncing), and its
  Lease rule limited to the name kube-scheduler;
- those kinds served: PVs, PVCs, ReplicationControllers, StatefulSets, ControllerRevisions, PDBs, the
  storage.k8s.io kinds and DeviceTaintRules;
- protobuf bodies of every built-in kind (it writes Leases, Events and ResourceClaims as protobuf), decoded
  as Go's JSON would have them;
- for kube-controller-manager: its role's `list watch */*` (every shared informer), the kinds its controllers
  inform on (Endpoints, EndpointSlices, ResourceQuotas, CronJobs, HPAs, CSRs, ServiceCIDRs, IPAddresses,
  ValidatingAdmissionPolicies, StorageVersionMigrations, ...), and the metadata client's
  PartialObjectMetadata (the garbage collector's informers: a full object of a kind client-go does not know
  failed its watch with `no kind "NodeResourceTopology" is registered`);
- kube's defaults of a claim's requests (allocationMode ExactCount, count 1): without them the scheduler's
  DRA plugin fails with "unsupported count mode".
"""

from __future__ import annotations

import base64
import datetime
import struct
import urllib.request
from typing import Any

import orjson
import pytest

from apiserver import protoschema
from apiserver import protowire as pw
from harness.apiserver import ApiServerProcess

PROTOBUF = "application/vnd.kubernetes.protobuf"


# -- a minimal protobuf encoder (gogo-protobuf's wire format, as Go clients send it) -----------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def num(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def msg(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def envelope(api_version: str, kind: str, obj: bytes) -> bytes:
    return b"k8s\x00" + msg(1, msg(1, api_version) + msg(2, kind)) + msg(2, obj)


def meta(name: str, namespace: str = "") -> bytes:
    return msg(1, name) + (msg(3, namespace) if namespace else b"")


def time_of(moment: datetime.datetime) -> bytes:
    return num(1, int(moment.timestamp())) + num(2, moment.microsecond * 1000)


# -- RBAC -------------------------------------------------------------------------------------------------

# (path, what the real kube-scheduler's informers list), all at the cluster scope
SCHEDULER_LISTS = (
    "/api/v1/nodes", "/api/v1/pods", "/api/v1/namespaces", "/api/v1/services",
    "/api/v1/replicationcontrollers", "/api/v1/persistentvolumes", "/api/v1/persistentvolumeclaims",
    "/apis/apps/v1/replicasets",
    "/apis/apps/v1/statefulsets", "/apis/policy/v1/poddisruptionbudgets",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/csidrivers", "/apis/storage.k8s.io/v1/csistoragecapacities",
    "/apis/storage.k8s.io/v1/storageclasses", "/apis/storage.k8s.io/v1/volumeattachments",
    "/apis/resource.k8s.io/v1/deviceclasses", "/apis/resource.k8s.io/v1/resourceclaims",
    "/apis/resource.k8s.io/v1/resourceslices", "/apis/resource.k8s.io/v1/devicetaintrules",
)  # fmt: skip


def test_kube_scheduler_may_list_everything_it_informs_on(api: ApiServerProcess) -> None:
    token = api.token_for("system:kube-scheduler")
    for path in SCHEDULER_LISTS:
        status, reply = api.request("GET", path + "?limit=500&resourceVersion=0", token=token)
        assert status == 200, (path, reply)
        assert reply["kind"].endswith("List"), (path, reply)


def test_kube_scheduler_lease_rule_names_its_own_lease(api: ApiServerProcess) -> None:
    token = api.token_for("system:kube-scheduler")
    lease = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15},
    }  # fmt: skip
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    assert api.request("POST", path, lease, token=token)[0] == 201
    status, current = api.request("GET", path + "/kube-scheduler", token=token)
    assert status == 200
    assert api.request("PUT", path + "/kube-scheduler", current, token=token)[0] == 200
    # outside kube-system (where kube's Role system::leader-locking-kube-scheduler grants all leases) the
    # ClusterRole's rule is held to its name: create is not limited by name, a get is
    other = {**lease, "metadata": {"name": "someone-else", "namespace": "default"}}
    default = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    assert api.request("POST", default, other, token=token)[0] == 201
    status, reply = api.request("GET", default + "/someone-else", token=token)
    assert status == 403, reply


def test_volume_scheduler_role_is_bootstrapped(api: ApiServerProcess) -> None:
    roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    status, role = api.request("GET", roles + "/system:volume-scheduler")
    assert status == 200
    assert {"apiGroups": [""], "resources": ["persistentvolumes"],
            "verbs": ["get", "list", "patch", "update", "watch"]} in role["rules"]  # fmt: skip
    status, binding = api.request(
        "GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:volume-scheduler"
    )
    assert status == 200 and binding["subjects"][0]["name"] == "system:kube-scheduler"
    status, role = api.request("GET", roles + "/system:kube-scheduler")
    lease_rule = next(r for r in role["rules"] if r.get("resourceNames"))
    assert "kube-scheduler" in lease_rule["resourceNames"] and lease_rule["resources"] == ["leases"]


# -- the kinds served for kube's control plane ------------------------------------------------------------


def test_discovery_lists_the_storage_and_policy_groups(api: ApiServerProcess) -> None:
    status, groups = api.request("GET", "/apis")
    names = {g["name"] for g in groups["groups"]}
    assert {"storage.k8s.io", "policy", "apps", "resource.k8s.io"} <= names
    status, resources = api.request("GET", "/apis/storage.k8s.io/v1")
    assert status == 200
    assert {r["name"] for r in resources["resources"]} >= {
        "csinodes", "csidrivers", "csistoragecapacities", "storageclasses", "volumeattachments",
        "volumeattachments/status",
    }  # fmt: skip
    status, core = api.request("GET", "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    volumes = by_name["persistentvolumes"]
    assert volumes["namespaced"] is False and volumes["shortNames"] == ["pv"]
    assert by_name["persistentvolumeclaims"]["namespaced"] is True


def test_stored_kinds_round_trip(api: ApiServerProcess) -> None:
    sc = {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
    }  # fmt: skip
    status, created = api.request("POST", "/apis/storage.k8s.io/v1/storageclasses", sc)
    assert status == 201 and created["volumeBindingMode"] == "WaitForFirstConsumer"
    pv = {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/"}},
        "status": {"phase": "Bound"},
    }  # fmt: skip
    status, created = api.request("POST", "/api/v1/persistentvolumes", pv)
    assert status == 201 and created["status"] == {"phase": "Pending"}  # kube's PrepareForCreate
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb1"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}}  # fmt: skip
    status, created = api.request("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb)
    assert status == 201 and created["metadata"]["generation"] == 1
    status, listed = api.request("GET", "/apis/policy/v1/poddisruptionbudgets")
    assert status == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["pdb1"]
    bad = {**pdb, "metadata": {"name": "pdb2"}, "spec": {"selector": "app=a"}}  # not a LabelSelector
    assert api.request("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", bad)[0] == 400


# -- protobuf bodies ---------------------------------------------------------------------------------------


def test_protobuf_lease_as_leader_election_writes_it(api: ApiServerProcess) -> None:
    now = datetime.datetime(2026, 12, 7, 23, 0, 1, 5, tzinfo=datetime.UTC)
    spec = msg(1, "me_1234") + num(2, 15) + msg(3, time_of(now)) + msg(4, time_of(now)) + num(5, 0)
    body = envelope("coordination.k8s.io/v1", "Lease", msg(1, meta("pb-lease", "kube-system")) + msg(2, spec))
    status, lease = api.request(
        "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", raw=body, content_type=PROTOBUF
    )
    assert status == 201, lease
    assert lease["spec"] == {
        "holderIdentity": "me_1234", "leaseDurationSeconds": 15, "acquireTime": "2026-12-07T23:00:01.000005Z",
        "renewTime": "2026-12-07T23:00:01.000005Z", "leaseTransitions": 0,
    }  # fmt: skip


def test_protobuf_core_event_is_read(api: ApiServerProcess) -> None:
    involved = msg(1, "Pod") + msg(2, "default") + msg(3, "p") + msg(5, "v1")
    event = (
        msg(1, meta("p.1", "default")) + msg(2, involved) + msg(3, "Scheduled") + msg(4, "assigned")
        + msg(5, msg(1, "default-scheduler")) + num(8, 1) + msg(9, "Normal") + msg(14, "default-scheduler")
    )  # fmt: skip
    status, reply = api.request(
        "POST", "/api/v1/namespaces/default/events", raw=envelope("v1", "Event", event), content_type=PROTOBUF
    )
    assert status == 201, reply
    assert reply["source"] == {"component": "default-scheduler"} and reply["count"] == 1
    assert reply["reportingComponent"] == "default-scheduler"


def test_protobuf_decoding_follows_go_json() -> None:
    resources = msg(2, msg(1, "kubenode.io/cpu") + msg(2, msg(1, "2")))  # requests: map<string, Quantity>
    ports = msg(6, num(3, 0))  # ports: [{containerPort: 0}]
    container = msg(1, "c") + msg(2, "busybox") + msg(8, resources) + ports
    volume = msg(1, "scratch") + msg(2, msg(2, b""))  # VolumeSource (inline) {emptyDir: {}}
    spec = msg(1, volume) + msg(2, container) + num(4, 0) + num(12, 0)  # terminationGracePeriodSeconds: 0
    spec += msg(7, msg(1, "k") + msg(2, "v"))  # nodeSelector
    pod = envelope("v1", "Pod", msg(1, meta("p", "ns") + num(7, 0)) + msg(2, spec))
    obj = protoschema.decode(pod)
    assert obj is not None
    assert obj["metadata"] == {"name": "p", "namespace": "ns"}  # generation 0 is omitempty: left out
    assert obj["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert obj["spec"]["containers"][0]["resources"] == {"requests": {"kubenode.io/cpu": "2"}}
    assert obj["spec"]["containers"][0]["ports"] == [{"containerPort": 0}]  # not omitempty: kept
    assert obj["spec"]["terminationGracePeriodSeconds"] == 0  # a pointer: a 0 that was sent is kept
    assert obj["spec"]["nodeSelector"] == {"k": "v"} and "hostPID" not in obj["spec"]  # false, omitempty
    deployment_spec = msg(4, msg(2, msg(1, num(1, 1) + msg(3, "25%")) + msg(2, num(2, 1))))
    decoded = protoschema.decode(envelope("apps/v1", "Deployment", msg(2, deployment_spec)))
    assert decoded is not None
    assert decoded["spec"]["strategy"] == {"rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}}
    secret = envelope("v1", "Secret", msg(2, msg(1, "k") + msg(2, b"\x00\x01")))
    decoded = protoschema.decode(secret)
    assert decoded is not None and decoded["data"] == {"k": base64.b64encode(b"\x00\x01").decode()}
    assert protoschema.go_duration(90 * 10**9) == "1m30s" and protoschema.go_duration(0) == "0s"
    assert protoschema.go_duration(3600 * 10**9) == "1h0m0s"


@pytest.mark.parametrize("count", [None, 3])
def test_claim_requests_get_kube_defaults(api: ApiServerProcess, count: int | None) -> None:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com"}
    if count is not None:
        exactly["count"] = count
    name = f"defaults-{count or 'unset'}"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}  # fmt: skip
    status, created = api.request("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", claim)
    assert status == 201, created
    request = created["spec"]["devices"]["requests"][0]["exactly"]
    assert request["allocationMode"] == "ExactCount" and request["count"] == (count or 1)
    # a PUT of the spec as first sent (no defaults) is not a change of the immutable spec
    created["spec"] = claim["spec"]
    path = f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name}"
    assert api.request("PUT", path, created)[0] == 200
    sub = {"name": "a", "deviceClassName": "gpu.example.com", "allocationMode": "All"}
    template = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [sub]}]}}},
    }  # fmt: skip
    status, created = api.request(
        "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", template
    )
    assert status == 201, created
    sub = created["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][0]
    assert sub["allocationMode"] == "All" and "count" not in sub


# -- kube-controller-manager -------------------------------------------------------------------------------

CONTROLLER_MANAGER_LISTS = (
    "/api/v1/endpoints", "/api/v1/resourcequotas", "/api/v1/limitranges", "/api/v1/podtemplates",
    "/api/v1/secrets", "/apis/batch/v1/cronjobs", "/apis/autoscaling/v2/horizontalpodautoscalers",
    "/apis/discovery.k8s.io/v1/endpointslices", "/apis/networking.k8s.io/v1/ipaddresses",
    "/apis/networking.k8s.io/v1/servicecidrs", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
    "/apis/certificates.k8s.io/v1/podcertificaterequests",
    "/apis/storagemigration.k8s.io/v1/storageversionmigrations",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "/apis/storage.k8s.io/v1/volumeattributesclasses", "/apis/scheduling.k8s.io/v1/priorityclasses",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies",
    *SCHEDULER_LISTS,
)  # fmt: skip


def test_kube_controller_manager_lists_and_watches_everything(api: ApiServerProcess) -> None:
    token = api.token_for("system:kube-controller-manager")
    for path in CONTROLLER_MANAGER_LISTS:
        status, reply = api.request("GET", path + "?limit=500&resourceVersion=0", token=token)
        assert status == 200, (path, reply)
    status, reply = api.request("GET", "/api/v1/namespaces/default/secrets/none", token=token)
    assert status == 404, reply  # get of secrets too (the tokens controller), unlike other kinds' get
    # the DaemonSet controller keeps its history in ControllerRevisions ("failed to construct revisions")
    revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "ds-1"},
                "data": {"spec": {}}, "revision": 1}  # fmt: skip
    status, reply = api.request(
        "POST", "/apis/apps/v1/namespaces/default/controllerrevisions", revision, token=token
    )
    assert status == 201, reply


def test_aggregated_cluster_roles_have_their_rules(api: ApiServerProcess) -> None:
    """admin, edit and view as kube's clusterrole-aggregation controller fills them (kube-apiserver stores
    them empty; the real controller, finding them different, patched them, a 403 under
    --use-service-account-credentials=false)."""
    roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    status, view = api.request("GET", roles + "/view")
    assert status == 200 and view["aggregationRule"]["clusterRoleSelectors"]
    pods_read = [r for r in view["rules"] if "pods" in r.get("resources", ()) and "get" in r["verbs"]]
    assert pods_read, view["rules"]  # from system:aggregate-to-view
    _, admin = api.request("GET", roles + "/admin")
    _, edit = api.request("GET", roles + "/edit")
    assert len(admin["rules"]) > len(edit["rules"]) > len(view["rules"]) > 0


METADATA_ACCEPT = (
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
METADATA_LIST_ACCEPT = METADATA_ACCEPT.replace("PartialObjectMetadata;", "PartialObjectMetadataList;")


def test_metadata_client_gets_partial_objects(api: ApiServerProcess) -> None:
    topology = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
                "metadata": {"name": "meta-node", "labels": {"a": "b"}}, "zones": []}  # fmt: skip
    path = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
    status, created = api.request("POST", path, topology)
    assert status == 201, created
    status, one = api.request("GET", path + "/meta-node", headers={"Accept": METADATA_ACCEPT})
    assert status == 200
    assert one["kind"] == "PartialObjectMetadata" and one["apiVersion"] == "meta.k8s.io/v1"
    assert one["metadata"]["labels"] == {"a": "b"} and "zones" not in one
    status, listed = api.request("GET", path, headers={"Accept": METADATA_LIST_ACCEPT})
    assert listed["kind"] == "PartialObjectMetadataList" and listed["metadata"]["resourceVersion"]
    assert {i["kind"] for i in listed["items"]} == {"PartialObjectMetadata"}
    status, text = api.request(
        "GET", path + "?watch=1&timeoutSeconds=1&resourceVersion=0", headers={"Accept": METADATA_ACCEPT}
    )
    assert status == 200
    lines = text.splitlines() if isinstance(text, str) else [orjson.dumps(text).decode()]
    events = [orjson.loads(line) for line in lines if line.strip()]
    assert events and all(e["object"]["kind"] == "PartialObjectMetadata" for e in events), events
    status, plain = api.request("GET", path + "/meta-node", headers={"Accept": "application/json"})
    assert plain["kind"] == "NodeResourceTopology"


# -- Priority admission -------------------------------------------------------------------------------------

PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def _pod_named(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}  # fmt: skip


def test_system_priority_classes_exist(api: ApiServerProcess) -> None:
    status, critical = api.request("GET", PRIORITY_CLASSES + "/system-node-critical")
    assert status == 200 and critical["value"] == 2000001000
    assert critical["preemptionPolicy"] == "PreemptLowerPriority"
    status, cluster = api.request("GET", PRIORITY_CLASSES + "/system-cluster-critical")
    assert status == 200 and cluster["value"] == 2000000000


def test_priority_admission_resolves_the_class(api: ApiServerProcess) -> None:
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "prio-high"},
            "value": 1000, "preemptionPolicy": "Never"}  # fmt: skip
    status, created = api.request("POST", PRIORITY_CLASSES, high)
    assert status == 201, created
    pods = "/api/v1/namespaces/default/pods"
    status, pod = api.request("POST", pods, _pod_named("prio-a", priorityClassName="prio-high"))
    assert status == 201, pod
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (1000, "Never")
    status, reply = api.request("POST", pods, _pod_named("prio-b", priorityClassName="nope"))
    assert (
        status == 403
        and reply["message"] == 'pods "prio-b" is forbidden: no PriorityClass with name nope was found'
    )
    status, reply = api.request("POST", pods, _pod_named("prio-c", priorityClassName="prio-high", priority=5))
    assert status == 403 and "the integer value of priority (5) must not be provided" in reply["message"]
    status, plain = api.request("POST", pods, _pod_named("prio-d"))
    assert status == 201 and plain["spec"]["priority"] == 0 and "priorityClassName" not in plain["spec"]
    low = {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "prio-default"},
        "value": 7, "globalDefault": True,
    }  # fmt: skip
    status, created = api.request("POST", PRIORITY_CLASSES, low)
    assert status == 201 and created["preemptionPolicy"] == "PreemptLowerPriority"
    try:
        status, defaulted = api.request("POST", pods, _pod_named("prio-e"))
        assert status == 201 and defaulted["spec"]["priority"] == 7
        assert defaulted["spec"]["priorityClassName"] == "prio-default"
    finally:
        api.request("DELETE", PRIORITY_CLASSES + "/prio-default")


def test_legacy_token_tracking_configmap_is_made(api: ApiServerProcess) -> None:
    """kube-controller-manager's legacy-serviceaccount-token-cleaner logs an error without it."""
    path = "/api/v1/namespaces/kube-system/configmaps/kube-apiserver-legacy-service-account-token-tracking"
    status, config = api.request("GET", path)
    assert status == 200
    datetime.date.fromisoformat(config["data"]["since"])


def test_controller_service_accounts_get_kube_controller_roles(api: ApiServerProcess) -> None:
    """kube-controller-manager --use-service-account-credentials=true: each controller as its ServiceAccount,
    held to kube's system:controller:<name> role."""
    status, role = api.request(
        "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:controller:deployment-controller"
    )
    assert status == 200 and role["metadata"]["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
    token = api.token_for(
        "system:serviceaccount:kube-system:deployment-controller", ["system:serviceaccounts"]
    )
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    spec = {"replicas": 0, "selector": {"matchLabels": {"a": "b"}}, "template": template}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "by-sa"}, "spec": spec}
    status, reply = api.request("POST", "/apis/apps/v1/namespaces/default/replicasets", rs, token=token)
    assert status == 201, reply
    status, reply = api.request("POST", "/api/v1/namespaces/default/pods", _pod_named("by-sa"), token=token)
    assert status == 403, reply  # the deployment controller makes ReplicaSets, not pods
    status, binding = api.request(
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/system::leader-locking-kube-scheduler",
    )
    assert status == 200 and binding["subjects"][0]["name"] == "system:kube-scheduler"


# -- protobuf responses ------------------------------------------------------------------------------------

GO_ACCEPT = "application/vnd.kubernetes.protobuf, */*"


def _raw_get(api: ApiServerProcess, path: str, accept: str) -> tuple[str, bytes]:
    request = urllib.request.Request(
        api.url + path, headers={"Authorization": f"Bearer {api.token}", "Accept": accept}
    )
    with urllib.request.urlopen(request, timeout=30, context=api.ssl_context()) as reply:
        return reply.headers["Content-Type"], reply.read()


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_go_clients_get_protobuf_objects_and_lists(api: ApiServerProcess) -> None:
    body = _pod_named("proto-reply", volumes=[{"name": "v", "emptyDir": {}}])
    cpu = {"kubenode.io/cpu": "1"}
    body["spec"]["containers"][0]["resources"] = {"requests": cpu, "limits": cpu}
    status, created = api.request("POST", "/api/v1/namespaces/default/pods", body)
    assert status == 201, created
    media, raw = _raw_get(api, "/api/v1/namespaces/default/pods/proto-reply", GO_ACCEPT)
    assert media == "application/vnd.kubernetes.protobuf" and raw.startswith(b"k8s\x00")
    assert protoschema.decode(raw) == _without_nulls(created)
    media, raw = _raw_get(api, "/api/v1/namespaces/default/pods", GO_ACCEPT)
    listed = protoschema.decode(raw)
    assert (
        media == "application/vnd.kubernetes.protobuf" and listed is not None and listed["kind"] == "PodList"
    )
    assert "proto-reply" in [item["metadata"]["name"] for item in listed["items"]]
    assert listed["metadata"]["resourceVersion"]
    # JSON where it is asked first, and for the metadata client and kubectl's Tables
    assert _raw_get(api, "/api/v1/namespaces/default/pods", "application/json, */*")[0] == "application/json"
    assert _raw_get(api, "/api/v1/namespaces/default/pods", METADATA_LIST_ACCEPT)[0] == "application/json"
    table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    assert _raw_get(api, "/api/v1/namespaces/default/pods", table)[0] == "application/json"
    # a kind with no protobuf form (served as kube serves a CRD): JSON
    path = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
    assert _raw_get(api, path, GO_ACCEPT)[0] == "application/json"


def test_go_clients_watch_in_protobuf_frames(api: ApiServerProcess) -> None:
    """Every frame of the stream is length-delimited protobuf, the bookmarks (initial-events-end and the
    last one before timeoutSeconds) included: one JSON line in it broke the Go reflector's framing."""
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "framed"},
             "spec": {"holderIdentity": "h", "renewTime": "2026-12-08T00:00:00.000001Z"}}  # fmt: skip
    assert api.request("POST", path, lease)[0] == 201
    query = "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    query += "&fieldSelector=metadata.name%3Dframed"
    media, raw = _raw_get(api, path + query + "&timeoutSeconds=3", GO_ACCEPT)
    assert media == "application/vnd.kubernetes.protobuf;stream=watch"
    events = []
    while raw:
        (length,) = struct.unpack(">I", raw[:4])
        frame, raw = raw[4 : 4 + length], raw[4 + length :]
        obj = protoschema.decode(pw.message(pw.message(frame, 2), 1))
        assert obj is not None
        events.append((pw.string(frame, 1), obj))
    kinds = [kind for kind, _ in events]
    assert kinds[:2] == ["ADDED", "BOOKMARK"] and kinds[-1] == "BOOKMARK", kinds
    assert events[0][1]["spec"]["renewTime"] == "2026-12-08T00:00:00.000001Z"
    assert events[1][1]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


# -- events.k8s.io/v1 ---------------------------------------------------------------------------------------

EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/default/events"


def test_events_v1_are_the_core_events_converted(api: ApiServerProcess) -> None:
    """client-go's tools/events (kube-scheduler's and kube-controller-manager's recorders) write through
    events.k8s.io/v1 when discovery lists it: the same objects as core/v1 Events, field names converted."""
    event = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "ev1.v1"},
        "eventTime": "2026-12-08T00:00:00.000001Z", "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-me", "action": "Scheduling", "reason": "Scheduled",
        "note": "Successfully assigned default/p to n", "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p", "apiVersion": "v1"},
    }  # fmt: skip
    status, created = api.request("POST", EVENTS_V1, event)
    assert status == 201, created
    assert created["apiVersion"] == "events.k8s.io/v1" and created["note"] == event["note"]
    status, core = api.request("GET", "/api/v1/namespaces/default/events/ev1.v1")
    assert status == 200 and core["apiVersion"] == "v1"
    assert (core["message"], core["reportingComponent"], core["involvedObject"]["name"]) == (
        event["note"], "default-scheduler", "p",
    )  # fmt: skip
    series = {"series": {"count": 2, "lastObservedTime": "2026-12-08T00:00:05.000002Z"}}
    status, patched = api.request(
        "PATCH", EVENTS_V1 + "/ev1.v1", series, content_type="application/merge-patch+json"
    )
    assert status == 200 and patched["series"]["count"] == 2 and patched["note"] == event["note"]
    status, listed = api.request("GET", EVENTS_V1 + "?fieldSelector=metadata.name%3Dev1.v1")
    assert listed["apiVersion"] == "events.k8s.io/v1" and listed["items"][0]["regarding"]["name"] == "p"
    status, text = api.request(
        "GET", EVENTS_V1 + "?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dev1.v1"
    )
    lines = text.splitlines() if isinstance(text, str) else [orjson.dumps(text).decode()]
    first = orjson.loads(lines[0])
    assert first["object"]["apiVersion"] == "events.k8s.io/v1" and "note" in first["object"]
    _, groups = api.request("GET", "/apis/events.k8s.io/v1")
    assert [r["name"] for r in groups["resources"]] == ["events"]
    assert api.request("DELETE", EVENTS_V1 + "/ev1.v1")[0] == 200
    assert api.request("GET", "/api/v1/namespaces/default/events/ev1.v1")[0] == 404


# -- the defaults kube's controllers dereference -------------------------------------------------------------


def test_statefulset_cronjob_and_rc_get_kube_defaults(api: ApiServerProcess) -> None:
    """A StatefulSet without revisionHistoryLimit panicked the real kube-controller-manager (its
    truncateHistory dereferences it): kube's apiserver defaults it, and the others its controllers read."""
    template = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    selector = {"matchLabels": {"app": "d"}}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "d"},
           "spec": {"serviceName": "d", "selector": selector, "template": template}}  # fmt: skip
    status, created = api.request("POST", "/apis/apps/v1/namespaces/default/statefulsets", sts)
    assert status == 201, created
    spec = created["spec"]
    assert (spec["replicas"], spec["revisionHistoryLimit"], spec["podManagementPolicy"]) == (
        1,
        10,
        "OrderedReady",
    )
    assert spec["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"partition": 0, "maxUnavailable": 1},
    }
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["template"]["spec"]["restartPolicy"] == "Always"  # the pod template's defaults too
    assert created["metadata"]["generation"] == 1
    job_template = {
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}
        }
    }
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "d"},
            "spec": {"schedule": "* * * * *", "jobTemplate": job_template}}  # fmt: skip
    status, created = api.request("POST", "/apis/batch/v1/namespaces/default/cronjobs", cron)
    assert status == 201, created
    spec = created["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "d"},
          "spec": {"template": template}}  # fmt: skip
    status, created = api.request("POST", "/api/v1/namespaces/default/replicationcontrollers", rc)
    assert status == 201, created
    assert created["spec"]["replicas"] == 1 and created["spec"]["selector"] == {"app": "d"}
    assert created["metadata"]["labels"] == {"app": "d"}
