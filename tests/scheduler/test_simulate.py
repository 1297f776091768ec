"""The simulator on the example clusters, in-process and through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scheduler.profile import load_configuration
from scheduler.simulate import read_cluster, simulate

ROOT = Path(__file__).parents[2]
CLUSTERS = ROOT / "examples" / "clusters"
PROFILES = ROOT / "examples" / "profiles"


def placements(name: str, profile: str | None = None) -> dict[str, tuple[str | None, str]]:
    config = load_configuration(PROFILES / profile) if profile else None
    result = simulate(read_cluster(CLUSTERS / name), config)
    return {p.pod: (p.node, p.message) for p in result.pods}


def test_gpu_pool_bin_packs_gpus_and_keeps_untolerating_pods_off() -> None:
    placed = placements("gpu-pool.yaml", "gpu-binpack.yaml")
    gpu_nodes = {placed[p][0] for p in ("ml/train-1", "ml/train-2", "ml/infer-1")}
    assert len(gpu_nodes) == 1 and gpu_nodes <= {"gpu-a", "gpu-b"}  # packed onto one node
    assert placed["ml/train-big"][0] is None and "4 Insufficient kubenode.io/gpu" in placed["ml/train-big"][1]
    assert placed["ml/no-toleration"][1].startswith(
        "0/4 nodes are available: 2 Insufficient kubenode.io/gpu, 2 node(s) had untolerated taint(s)."
    )
    assert {placed["shop/web-1"][0], placed["shop/web-2"][0]} == {"cpu-a", "cpu-b"}  # spread


def test_preemption_example_evicts_the_cheapest_victim() -> None:
    result = simulate(read_cluster(CLUSTERS / "preemption.yaml"))
    placed = {p.pod: p.node for p in result.pods}
    assert result.preempted == ["batch/crunch-3"]
    assert placed["prod/api"] == "node-2" and placed["prod/report"] is None
    assert result.nodes["node-2"].requested["cpu"] == 4000


def test_mixed_cluster_counts_init_containers_overhead_and_reports_bad_pods() -> None:
    result = simulate(read_cluster(CLUSTERS / "mixed.json"))
    placed = {p.pod: (p.node, p.message) for p in result.pods}
    assert placed["default/db-migrate"][0] == "core-2"  # 6.25 cpu: init container + overhead
    assert result.nodes["core-2"].requested["cpu"] == 2000 + 6000 + 250
    assert placed["default/pinned-cpus"][0] == "edge-1"  # only edge-1 has kubenode.io/cpu
    assert placed["default/zone-a-only"][1].startswith(
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    assert placed["default/typo"][0] is None
    assert "spec.containers[0].resources.requests.cpu: invalid quantity 'two'" in placed["default/typo"][1]


def simulate_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cli.main", "scheduler", "simulate", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def test_cli_json_output_shape() -> None:
    run = simulate_cli("--cluster", str(CLUSTERS / "preemption.yaml"), "--output", "json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert set(data) == {"pods", "preempted", "nodes"}
    assert data["pods"][0] == {
        "pod": "prod/api",
        "node": "node-2",
        "message": "Successfully assigned prod/api to node-2",
    }
    assert data["preempted"] == ["batch/crunch-3"]
    assert data["nodes"]["node-3"] == {
        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "requested": {"cpu": "4", "memory": "8Gi", "pods": "1"},
    }


def test_cli_reports_a_bad_profile_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "profile.yaml"
    bad.write_text("profiles: [{plugins: {score: {enabled: [{name: Magic}]}}}]\n")
    run = simulate_cli("--cluster", str(CLUSTERS / "mixed.json"), "--profile", str(bad))
    assert run.returncode == 2
    assert f"{bad}: profiles[0].plugins.score.enabled[0].name: unsupported score plugin 'Magic'" in run.stderr


def test_bad_objects_are_reported_and_the_rest_still_scheduled(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        """
apiVersion: v1
kind: Node
metadata: {name: good}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: bad}
status: {allocatable: {cpu: "lots"}}
---
apiVersion: v1
kind: Pod
metadata: {name: negative}
spec: {containers: [{name: c, resources: {requests: {memory: "-1Gi"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: fine}
spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
"""
    )
    objects = read_cluster(cluster)
    assert len(objects.errors) == 1
    assert objects.errors[0].startswith(
        f"invalid Node: {cluster} (document 2): status.allocatable.cpu: invalid quantity 'lots'"
    )
    result = simulate(objects)
    placed = {p.pod: (p.node, p.message) for p in result.pods}
    assert placed["default/fine"][0] == "good"
    assert placed["default/negative"][0] is None
    assert (
        "spec.containers[0].resources.requests.memory: must be greater than or equal to 0"
        in (placed["default/negative"][1])
    )


def test_an_empty_cluster_file_warns_no_nodes_no_pods(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    run = simulate_cli("--cluster", str(empty))
    assert run.returncode == 0, run.stderr
    assert f"kubenode scheduler: warning: {empty}: no nodes, no pods" in run.stderr


def test_duplicates_and_a_pod_on_a_missing_node_are_reported(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        """
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "2", pods: "10"}}
---
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "64", pods: "10"}}
---
kind: Pod
metadata: {name: p, namespace: ns}
spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
---
kind: Pod
metadata: {name: p, namespace: ns}
spec: {containers: [{name: c, resources: {requests: {cpu: "9"}}}]}
---
kind: Pod
metadata: {name: ghost, namespace: ns}
spec: {nodeName: nowhere, containers: [{name: c}]}
"""
    )
    objects = read_cluster(cluster)
    assert objects.errors == [
        f"duplicate Node 'n1': {cluster} (document 2) repeats {cluster} (document 1); the first is kept",
        f"duplicate Pod 'ns/p': {cluster} (document 4) repeats {cluster} (document 3); the first is kept",
    ]
    result = simulate(objects)
    placed = {p.pod: (p.node, p.message) for p in result.pods}
    assert placed["ns/p"][0] == "n1"  # the first pod (1 cpu) on the first node (2 cpu)
    assert placed["ns/ghost"] == ("nowhere", "bound to node 'nowhere', which is not in the cluster")
    assert any("pod ns/ghost is bound to node 'nowhere'" in error for error in result.errors)
