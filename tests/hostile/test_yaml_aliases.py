"""YAML anchors and aliases are read as kubectl reads them, within go-yaml's alias budget, wherever YAML is
loaded: manifests (the agent's, `kubenode up`'s), the simulator's cluster files, the API server's YAML bodies
(issue 26). The 1.3 KB alias bomb is refused in tests/hostile/test_bounded_parsing.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cli.up.apply import read_manifests
from harness.apiserver import ApiServerProcess
from kubenode import yamlload
from kubenode.model import ValidationError
from kubenode.model.documents import decode_objects
from scheduler.simulate import read_cluster

# 9 anchors, each a list of 9 aliases of the one before: 9^9 strings once expanded.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
POD_WITH_ANCHORS = """\
apiVersion: v1
kind: Pod
metadata:
  name: anchored
  labels: &labels {app: web, tier: front}
  annotations:
    copy: "yes"
spec:
  containers:
  - &container
    name: main
    image: busybox
    resources:
      requests: &requests {cpu: 100m, memory: 64Mi}
      limits: *requests
  - <<: *container
    name: side
  nodeSelector: *labels
"""


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServerProcess]:
    with ApiServerProcess() as server:
        yield server


def test_go_yamls_alias_ratio() -> None:
    assert yamlload.allowed_alias_ratio(1_000) == 0.99
    assert yamlload.allowed_alias_ratio(400_000) == 0.99
    assert yamlload.allowed_alias_ratio(2_200_000) == pytest.approx(0.545)
    assert yamlload.allowed_alias_ratio(4_000_000) == 0.10


def test_anchors_aliases_and_merge_keys_expand_unshared() -> None:
    [(_, pod)] = decode_objects(POD_WITH_ANCHORS, "pod.yaml")
    containers = pod["spec"]["containers"]
    assert [c["name"] for c in containers] == ["main", "side"]
    assert containers[1]["image"] == "busybox" and containers[1]["resources"] == containers[0]["resources"]
    assert pod["spec"]["nodeSelector"] == {"app": "web", "tier": "front"}
    containers[0]["resources"]["requests"]["cpu"] = "2"  # each alias is its own copy, as in Go
    assert containers[0]["resources"]["limits"]["cpu"] == "100m"
    assert containers[1]["resources"]["requests"]["cpu"] == "100m"


def test_many_aliases_within_budget_load_and_too_many_do_not() -> None:
    body = "".join(f"k{i}: v{i}\n" for i in range(2000))
    within = "base: &b {x: 1}\n" + body + "uses: [" + ", ".join(["*b"] * 100) + "]\n"
    assert len(yamlload.load(within)["uses"]) == 100
    big = "{" + ", ".join(f"k{i}: {i}" for i in range(100)) + "}"
    over = f"base: &b {big}\nuses: [" + ", ".join(["*b"] * 1000) + "]\n"  # 99.4% of the nodes from aliases
    with pytest.raises(yamlload.ExcessiveAliasing, match="excessive aliasing"):
        yamlload.load(over)
    with pytest.raises(yaml.YAMLError, match="excessive aliasing"):
        yamlload.load("&a [*a, *a]")  # a recursive alias expands forever


def test_kubenode_up_manifests_and_simulator_files_take_aliases(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "pod.yaml").write_text(POD_WITH_ANCHORS)
    [(_, pod)] = read_manifests(manifests)
    assert pod["spec"]["containers"][1]["name"] == "side"
    cluster = tmp_path / "cluster.yaml"
    node = "kind: Node\nmetadata: {name: n1}\nstatus:\n  capacity: &cap {cpu: '4', memory: 8Gi}\n"
    pod_text = POD_WITH_ANCHORS.replace("  nodeSelector: *labels\n", "")
    cluster.write_text(node + "  allocatable: *cap\n---\n" + pod_text)
    objects = read_cluster(cluster)
    assert [n.name for n in objects.nodes] == ["n1"] and [p.key for p in objects.pods] == ["default/anchored"]
    cluster.write_text(BOMB)
    with pytest.raises(ValidationError, match="excessive aliasing"):
        read_cluster(cluster)


def test_the_api_server_reads_aliases_in_yaml_bodies_within_budget(api: ApiServerProcess) -> None:
    path = "/api/v1/namespaces/default/pods"
    status, body = api.request("POST", path, raw=POD_WITH_ANCHORS.encode(), content_type="application/yaml")
    assert status == 201 and body["spec"]["containers"][1]["resources"]["limits"]["memory"] == "64Mi"
    status, body = api.request("POST", path, raw=BOMB.encode(), content_type="application/yaml")
    assert status == 400 and "excessive aliasing" in body["message"]
    status, body = api.request(
        "PATCH",
        path + "/anchored?fieldManager=t",
        raw=BOMB.encode(),
        content_type="application/apply-patch+yaml",
    )
    assert status == 400 and "excessive aliasing" in body["message"]
