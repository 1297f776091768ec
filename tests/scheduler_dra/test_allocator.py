"""Kube's structured allocator table (allocator_cases.yaml) against scheduler/dra/allocator.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubenode.model.objects import Node
from scheduler.dra.allocator import AllocationError, Allocator
from scheduler.dra.matcher import Matcher
from scheduler.dra.pools import gather_pools
from tests.scheduler_dra import support

CASES = yaml.safe_load((Path(__file__).parent / "allocator_cases.yaml").read_text())


def _node(name: str) -> Node:
    region = "region-1" if name == "node-1" else "region-2"
    return Node(name, labels={"region": region, "planet": "earth"})


def _result_text(result: Any) -> str:
    text = f"{result.request} {result.driver}/{result.pool}/{result.device}"
    return text + " admin" if result.admin_access else text


def _expected_selector(case: dict[str, Any], node: str) -> dict[str, Any] | None:
    spec = case.get("node", "local")
    if spec == "none":
        return None
    if spec == "local":
        return {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
    return {"nodeSelectorTerms": [spec]}


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_kube_allocator_case(case: dict[str, Any]) -> None:
    node = _node(case.get("node_name", "node-1"))
    in_use = {tuple(d.split("/")) for d in case.get("allocated", ())}
    allocator = Allocator(support.classes(case["classes"]), in_use, Matcher())
    pools = gather_pools(support.slices(case["slices"]), node)
    claims = support.claims(case["claims"])
    if "error" in case:
        with pytest.raises(AllocationError, match=case["error"].replace("(", r"\(").replace(")", r"\)")):
            allocator.allocate(node, pools, claims)
        return
    allocations = allocator.allocate(node, pools, claims)
    if case["expect"] is None:
        assert allocations is None
        return
    assert allocations is not None
    assert [[_result_text(r) for r in a.results] for a in allocations] == case["expect"]
    for allocation in allocations:
        assert allocation.node_selector == _expected_selector(case, node.name)
    if "config" in case:
        want = [
            [
                {
                    "source": c["source"],
                    **({"requests": c["requests"]} if "requests" in c else {}),
                    "opaque": support.opaque(c["driver"], c["attribute"]),
                }
                for c in configs
            ]
            for configs in case["config"]
        ]
        assert [list(a.config) for a in allocations] == want
