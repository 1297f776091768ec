"""`kubenode trace pod`'s DRA half: each claim's devices and every node's verdict, from the API's objects."""

from __future__ import annotations

from typing import Any

import yaml

from cli.claimtrace import trace_claims
from kubenode.kubeclient import NotFound
from kubenode.kubeclient.client import Resource
from scheduler.simulate import read_cluster, simulate
from tests.scheduler_dra.test_simulate_dra import CLUSTER


class ListingClient:
    """Answers list_all from objects by kind, as the API would after the simulated run."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]], serves_dra: bool = True) -> None:
        self.objects = objects
        self.serves_dra = serves_dra

    def list_all(self, resource: Resource, namespace: str | None = None) -> tuple[list[dict[str, Any]], str]:
        if resource.group == "resource.k8s.io" and not self.serves_dra:
            raise NotFound(404, "NotFound", "the server could not find the requested resource", {})
        return self.objects.get(resource.kind, []), "1"


def _api_objects() -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """The cluster file's objects, with the simulated allocations written into the claims' status."""
    result = simulate(read_cluster(CLUSTER))
    placed = {p.pod: p.node for p in result.pods}
    objects: dict[str, list[dict[str, Any]]] = {}
    for obj in yaml.safe_load_all(CLUSTER.read_text()):
        if obj["kind"] == "ResourceClaim":
            results = []
            for text in result.claims[f"default/{obj['metadata']['name']}"]:
                request, device_id = text.split()
                driver, pool, device = device_id.split("/")
                results.append({"request": request, "driver": driver, "pool": pool, "device": device})
            if results:
                obj["status"] = {"allocation": {"devices": {"results": results}}}
        objects.setdefault(obj["kind"], []).append(obj)
    trainer = next(o for o in objects["Pod"] if o["metadata"]["name"] == "trainer")
    return objects, {**trainer, "spec": {**trainer["spec"], "nodeName": placed["default/trainer"]}}


def test_trace_names_the_claims_devices_and_why_the_other_node_did_not_fit() -> None:
    objects, trainer = _api_objects()
    traced = trace_claims(ListingClient(objects), trainer)  # type: ignore[arg-type]
    assert traced is not None and traced["problems"] == []
    assert traced["claims"] == [
        {
            "claim": "default/big",
            "allocated": True,
            "devices": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-b", "device": "gpu-0"},
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-b", "device": "gpu-1"},
            ],
            "nodeSelector": None,
            "reservedFor": [],
        }
    ]
    verdicts = {v["node"]: v for v in traced["nodes"]}
    assert verdicts["node-a"]["fits"] is False
    assert verdicts["node-a"]["reason"] == "cannot allocate all claims"
    assert verdicts["node-a"]["requests"] == [
        {"claim": "default/big", "request": "gpu", "wants": 2, "matching": 0, "free": 0}
    ]
    assert verdicts["node-b"] == {
        "node": "node-b",
        "fits": True,
        "requests": [{"claim": "default/big", "request": "gpu", "wants": 2, "matching": 2, "free": 2}],
    }


def test_trace_says_when_the_api_has_no_dra_and_skips_pods_without_claims() -> None:
    objects, trainer = _api_objects()
    assert trace_claims(ListingClient(objects, serves_dra=False), trainer) == {  # type: ignore[arg-type]
        "problems": ["the API serves no resource.k8s.io/v1"]
    }
    assert trace_claims(ListingClient(objects), {"metadata": {"name": "p"}, "spec": {}}) is None  # type: ignore[arg-type]
