"""The CRI runtime's pure parts: the CRI log format, image references and pull policies, resources."""

from __future__ import annotations

from typing import Any

from agent.kuberuntime.cri.configs import container_resources, oom_score_adj
from agent.kuberuntime.cri.images import is_valid_reference, pull_policy
from agent.kuberuntime.crilog import content
from kubenode.model.parse import parse_pod


def pod(container: dict[str, Any]) -> Any:
    return parse_pod(
        {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [{"name": "c", **container}]}}
    )


def test_cri_log_lines_are_unwrapped() -> None:
    assert content(b"2026-01-01T00:00:00.1Z stdout F hello\n", False) == b"hello\n"
    assert content(b"2026-01-01T00:00:00.1Z stderr P hel\n", False) == b"hel"
    assert content(b"2026-01-01T00:00:00.1Z stdout F \n", False) == b"\n"
    assert content(b"2026-01-01T00:00:00.1Z stdout F hi\n", True) == b"2026-01-01T00:00:00.1Z hi\n"
    assert content(b"not a CRI line\n", False) == b"not a CRI line\n"


def test_image_references_as_kube_parses_them() -> None:
    for good in (
        "busybox",
        "busybox:1.36",
        "registry.k8s.io/pause:3.9",
        "localhost:5000/a/b",
        "a@sha256:" + "0" * 64,
    ):
        assert is_valid_reference(good), good
    for bad in ("BusyBox", "busybox:", "a b", ":tag", "busybox@sha256:xyz", ""):
        assert not is_valid_reference(bad), bad


def policy(container: dict[str, Any]) -> str:
    p = pod(container)
    return pull_policy(p, p.containers[0])


def test_pull_policy_defaults_as_the_api_server_does() -> None:
    assert policy({"image": "busybox"}) == "Always"
    assert policy({"image": "busybox:latest"}) == "Always"
    assert policy({"image": "busybox:1.36"}) == "IfNotPresent"
    assert policy({"image": "busybox", "imagePullPolicy": "Never"}) == "Never"


def test_resources_as_kuberuntime_container_linux_sets_them() -> None:
    p = pod(
        {
            "image": "b",
            "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m", "memory": "64Mi"}},
        }
    )
    r = container_resources(p, p.containers[0], "0-1")
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period) == (256, 50000, 100000)
    assert (r.memory_limit_in_bytes, r.cpuset_cpus) == (64 * 1024 * 1024, "0-1")
    best_effort = pod({"image": "b"})
    r = container_resources(best_effort, best_effort.containers[0], "")
    assert (r.cpu_shares, r.cpu_quota, r.memory_limit_in_bytes) == (2, 0, 0)
    assert oom_score_adj(best_effort, best_effort.containers[0], 1 << 30) == 1000
    guaranteed = pod({"image": "b", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}})
    assert oom_score_adj(guaranteed, guaranteed.containers[0], 1 << 34) == -997
    burstable = pod({"image": "b", "resources": {"requests": {"memory": "1Gi"}}})
    assert oom_score_adj(burstable, burstable.containers[0], 4 << 30) == 750
