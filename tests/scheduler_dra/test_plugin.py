"""The DynamicResources plugin in the engine: Filter, Reserve, PreBind, requeueing, restarts and replicas."""

from __future__ import annotations

from typing import Any

from kubenode.dra.types import ResourceClaim, parse_device_class, parse_resource_claim, parse_resource_slice
from kubenode.model.objects import Container, Pod
from scheduler.engine import Scheduler
from tests.scheduler.support import RecordingBinder, engine, node
from tests.scheduler_dra import support

GPU_CLASS = {"gpu.example.com": "gpu.example.com"}


class ClaimApi:
    """The API's claims: status writes with resourceVersion checks (a stale write is a conflict)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def add(self, name: str, requests: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        obj = support.claim_object(
            {"name": name, "requests": requests or [{"name": "gpu", "class": "gpu.example.com"}]}
        )
        obj["metadata"]["resourceVersion"] = "1"
        self.objects[f"default/{name}"] = obj
        return obj

    def write_status(self, claim: ResourceClaim, status: dict[str, Any]) -> ResourceClaim:
        stored = self.objects[claim.key]
        if claim.raw["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            raise RuntimeError(f"Operation cannot be fulfilled on resourceclaims {claim.name!r}: conflict")
        version = str(int(stored["metadata"]["resourceVersion"]) + 1)
        stored = {**stored, "metadata": {**stored["metadata"], "resourceVersion": version}, "status": status}
        self.objects[claim.key] = stored
        return parse_resource_claim(stored)


def claim_pod(name: str, *claims: str) -> Pod:
    raw = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"resourceClaims": [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]},
    }
    return Pod(name, uid=f"uid-{name}", containers=(Container("main"),), raw=raw)


def cluster(api: ClaimApi, nodes: int = 2, gpus: int = 1) -> tuple[Scheduler, RecordingBinder]:
    scheduler, _, binder = engine()
    scheduler.dra.writer = api
    for i in range(nodes):
        scheduler.add_node(node(f"node-{i}", {"cpu": 4000}))
        devices = [f"gpu-{g}" for g in range(gpus)]
        obj = support.slice_object(
            {
                "name": f"node-{i}-gpus",
                "node": f"node-{i}",
                "pool": f"node-{i}",
                "driver": "gpu.example.com",
                "devices": devices,
            }
        )
        scheduler.dra.put_slice(parse_resource_slice(obj))
    for name, spec in GPU_CLASS.items():
        scheduler.dra.put_class(parse_device_class(support.class_object(name, spec)))
    for obj in api.objects.values():
        scheduler.dra.put_claim(parse_resource_claim(obj))
    return scheduler, binder


def allocated(api: ClaimApi, name: str) -> list[str]:
    status = api.objects[f"default/{name}"].get("status") or {}
    results = (status.get("allocation") or {}).get("devices", {}).get("results", [])
    return [f"{r['pool']}/{r['device']}" for r in results]


def reserved(api: ClaimApi, name: str) -> list[str]:
    return [r["name"] for r in (api.objects[f"default/{name}"].get("status") or {}).get("reservedFor", [])]


def test_each_claim_gets_its_own_device_and_the_third_pod_is_unschedulable_with_kubes_message() -> None:
    api = ClaimApi()
    for name in ("a", "b", "c"):
        api.add(name)
    scheduler, binder = cluster(api)
    for name in ("a", "b", "c"):
        scheduler.add_pod(claim_pod(f"pod-{name}", name))
    outcomes = [scheduler.schedule_one() for _ in range(3)]
    placed = {pod: node for pod, node in binder.bound}
    assert sorted(placed.values()) == ["node-0", "node-1"]
    assert allocated(api, "a") == [f"{placed['default/pod-a']}/gpu-0"]
    assert allocated(api, "b") == [f"{placed['default/pod-b']}/gpu-0"]
    assert reserved(api, "a") == ["pod-a"]
    assert outcomes[2] is not None
    assert outcomes[2].node is None
    assert outcomes[2].message == (
        "0/2 nodes are available: 2 cannot allocate all claims. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    node_selector = api.objects["default/a"]["status"]["allocation"]["nodeSelector"]
    assert node_selector["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [placed["default/pod-a"]]


def test_a_claim_shared_by_two_pods_is_allocated_once_and_both_run_where_its_device_is() -> None:
    api = ClaimApi()
    api.add("shared")
    scheduler, binder = cluster(api, nodes=3)
    scheduler.add_pod(claim_pod("first", "shared"))
    scheduler.add_pod(claim_pod("second", "shared"))
    scheduler.schedule_one()
    scheduler.schedule_one()
    nodes = {node for _, node in binder.bound}
    assert len(binder.bound) == 2 and len(nodes) == 1
    assert len(allocated(api, "shared")) == 1
    assert reserved(api, "shared") == ["first", "second"]


def test_a_pod_waits_for_its_claim_and_is_requeued_when_the_claim_appears() -> None:
    api = ClaimApi()
    scheduler, binder = cluster(api)
    scheduler.add_pod(claim_pod("p", "late"))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.message == 'resourceclaim.resource.k8s.io "late" not found'
    assert scheduler.schedule_one() is None
    scheduler.dra.put_claim(parse_resource_claim(api.add("late")))
    scheduler.clock.advance(10)  # type: ignore[attr-defined]
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node is not None
    assert binder.bound == [("default/p", outcome.node)]


def test_an_unschedulable_pod_is_requeued_when_a_resource_slice_appears() -> None:
    api = ClaimApi()
    api.add("a")
    api.add("b")
    scheduler, _ = cluster(api, nodes=1)
    scheduler.add_pod(claim_pod("pa", "a"))
    scheduler.add_pod(claim_pod("pb", "b"))
    scheduler.schedule_one()
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.message.startswith(
        "0/1 nodes are available: 1 cannot allocate all claims."
    )
    more = support.slice_object(
        {
            "name": "extra",
            "node": "node-0",
            "pool": "extra",
            "driver": "gpu.example.com",
            "devices": ["gpu-9"],
        }
    )
    scheduler.dra.put_slice(parse_resource_slice(more))
    scheduler.clock.advance(10)  # type: ignore[attr-defined]
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "node-0"
    assert allocated(api, "b") == ["extra/gpu-9"]


def test_a_restarted_scheduler_rebuilds_taken_devices_from_claim_status() -> None:
    api = ClaimApi()
    api.add("a")
    api.add("b")
    first, _ = cluster(api, nodes=1, gpus=2)
    first.add_pod(claim_pod("pa", "a"))
    first.schedule_one()
    assert allocated(api, "a") == ["node-0/gpu-0"]
    # A new process (or the next leader of several replicas) knows only what the API says.
    second, binder = cluster(api, nodes=1, gpus=2)
    second.add_pod(claim_pod("pb", "b"))
    second.schedule_one()
    assert binder.bound == [("default/pb", "node-0")]
    assert allocated(api, "b") == ["node-0/gpu-1"]


def test_a_stale_claim_write_fails_the_bind_and_frees_the_in_flight_devices() -> None:
    api = ClaimApi()
    api.add("a")
    scheduler, binder = cluster(api, nodes=1)
    stored = api.objects["default/a"]  # written by someone else meanwhile:
    api.objects["default/a"] = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "7"}}
    scheduler.add_pod(claim_pod("pa", "a"))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "node-0"
    assert binder.bound == []
    assert scheduler.dra.state.used_devices() == set()
    scheduler.dra.put_claim(parse_resource_claim(api.objects["default/a"]))  # the informer catches up
    scheduler.clock.advance(60)  # type: ignore[attr-defined]
    scheduler.flush()
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "node-0"
    assert binder.bound == [("default/pa", "node-0")]


def test_a_claim_allocated_on_another_node_keeps_the_pod_off_the_others() -> None:
    api = ClaimApi()
    api.add("a")
    scheduler, binder = cluster(api, nodes=2)
    scheduler.add_pod(claim_pod("first", "a"))
    scheduler.schedule_one()
    where = binder.bound[0][1]
    scheduler.dra.put_claim(parse_resource_claim(api.objects["default/a"]))
    scheduler.add_pod(claim_pod("second", "a"))
    scheduler.schedule_one()
    assert binder.bound[1] == ("default/second", where)
    other = "node-1" if where == "node-0" else "node-0"
    assert (
        scheduler.dra.reasons == {}
        or scheduler.dra.reasons.get(other) == "resourceclaim not available on the node"
    )


def test_a_claim_from_a_template_is_read_from_the_pods_status() -> None:
    api = ClaimApi()
    api.add("p-gpu-x7k2")
    scheduler, _ = cluster(api, nodes=1)
    raw = {
        "metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]},
    }
    pod = Pod("p", uid="uid-p", containers=(Container("main"),), raw=raw)
    scheduler.add_pod(pod)
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.message == 'pod "default/p": ResourceClaim not created yet'
    made = {**raw, "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2"}]}}
    scheduler.add_pod(Pod("p", uid="uid-p", containers=(Container("main"),), raw=made))
    outcome = scheduler.schedule_one()
    assert outcome is not None and outcome.node == "node-0"
    assert allocated(api, "p-gpu-x7k2") == ["node-0/gpu-0"]


def test_a_network_attached_device_goes_to_one_claim_only() -> None:
    api = ClaimApi()
    api.add("a")
    api.add("b")
    scheduler, _ = cluster(api, nodes=2, gpus=0)
    everywhere = support.slice_object(
        {"name": "fabric", "pool": "fabric", "driver": "gpu.example.com", "devices": ["shared-gpu"]}
    )
    scheduler.dra.put_slice(parse_resource_slice(everywhere))
    scheduler.add_pod(claim_pod("pa", "a"))
    scheduler.add_pod(claim_pod("pb", "b"))
    first, second = scheduler.schedule_one(), scheduler.schedule_one()
    assert first is not None and first.node is not None
    assert allocated(api, "a") == ["fabric/shared-gpu"]
    assert "nodeSelector" not in api.objects["default/a"]["status"]["allocation"]  # reachable from every node
    assert second is not None and second.node is None
    assert second.message.startswith("0/2 nodes are available: 2 cannot allocate all claims.")
