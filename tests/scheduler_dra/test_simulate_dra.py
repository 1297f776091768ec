"""`scheduler simulate` with ResourceSlices, DeviceClasses and ResourceClaims in the cluster file."""

from __future__ import annotations

from pathlib import Path

from scheduler.simulate import read_cluster, simulate

CLUSTER = Path(__file__).parent / "dra_cluster.yaml"


def test_the_simulator_allocates_claims_from_the_files_slices() -> None:
    cluster = read_cluster(CLUSTER)
    assert cluster.errors == []
    result = simulate(cluster)
    placed = {p.pod: (p.node, p.message) for p in result.pods}
    assert placed["default/trainer"][0] == "node-b"  # only node-b's GPUs have 64Gi or more
    assert placed["default/web-1"][0] == placed["default/web-2"][0] == "node-a"
    assert placed["default/greedy"] == (
        None,
        "0/2 nodes are available: 2 cannot allocate all claims. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    )
    assert result.claims == {
        "default/big": ["gpu gpu.example.com/node-b/gpu-0", "gpu gpu.example.com/node-b/gpu-1"],
        "default/shared": ["gpu gpu.example.com/node-a/gpu-0"],
        "default/too-many": [],
    }
    assert result.as_json()["claims"] == result.claims


def test_a_bad_dra_object_is_reported_naming_its_field(tmp_path: Path) -> None:
    text = CLUSTER.read_text().replace("count: 3", "count: -3")
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    cluster = read_cluster(path)
    assert len(cluster.errors) == 1
    assert "ResourceClaim" in cluster.errors[0]
    assert "spec.devices.requests[0].exactly.count: must be a positive integer, got -3" in cluster.errors[0]
    result = simulate(cluster)
    greedy = next(p for p in result.pods if p.pod == "default/greedy")
    assert greedy.message == 'resourceclaim.resource.k8s.io "too-many" not found'
