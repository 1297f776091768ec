"""CRIStats' choice of path (agent/stats/cri.py), with the runtime's answers given as CRI messages: the pod
sandbox's stats where the runtime has them, the pod cgroup and ListContainerStats where it has not. The
real containerd's answers are tested in test_cri_stats_logs.py."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from agent.container.podrecord import RUNNING, ContainerRecord, PodRecord
from agent.container.usage import Usage
from agent.kuberuntime.cri.client import CRIError
from agent.stats.cri import CRIStats
from kubenode.api.cri.v1 import api_pb2 as cri


def container_stats(cid: str, name: str, cpu: int, memory: int) -> cri.ContainerStats:
    return cri.ContainerStats(
        attributes=cri.ContainerAttributes(id=cid, metadata=cri.ContainerMetadata(name=name)),
        cpu=cri.CpuUsage(timestamp=2_000_000_000, usage_core_nano_seconds=cri.UInt64Value(value=cpu)),
        memory=cri.MemoryUsage(timestamp=2_000_000_000, working_set_bytes=cri.UInt64Value(value=memory)),
    )


def record() -> PodRecord:
    pod = PodRecord(uid="u1", namespace="default", name="p")
    for name in ("main", "side", "done"):
        pod.containers[name] = ContainerRecord(name)
        pod.containers[name].state = RUNNING if name != "done" else "terminated"
    return pod


IDS = {"main": "c-main", "side": "c-side", "done": "c-done"}
LISTED = [
    container_stats("c-main", "main", 7, 70),
    container_stats("c-side", "side", 3, 30),
    container_stats("c-old", "main", 99, 990),  # a dead copy beside the tracked one
]


def sandbox_stats(uid: str, containers: list[cri.ContainerStats]) -> cri.PodSandboxStats:
    linux = cri.LinuxPodSandboxStats(
        cpu=cri.CpuUsage(timestamp=1_000_000_000, usage_core_nano_seconds=cri.UInt64Value(value=12)),
        memory=cri.MemoryUsage(timestamp=1_000_000_000, working_set_bytes=cri.UInt64Value(value=120)),
        process=cri.ProcessUsage(process_count=cri.UInt64Value(value=4)),
        containers=containers,
    )
    attributes = cri.PodSandboxAttributes(labels={"io.kubernetes.pod.uid": uid})
    return cri.PodSandboxStats(attributes=attributes, linux=linux)


def test_the_sandboxs_stats_give_the_pod_and_its_tracked_running_containers() -> None:
    selectors = []

    def call(method: str, request: Any) -> Any:
        assert method == "ListPodSandboxStats"
        selectors.append(dict(request.filter.label_selector))
        stopped = cri.PodSandboxStats(
            attributes=cri.PodSandboxAttributes(labels={"io.kubernetes.pod.uid": "u1"})
        )
        return cri.ListPodSandboxStatsResponse(stats=[stopped, sandbox_stats("u1", LISTED)])

    stats = CRIStats(call, "node-a", clock=lambda: 0.0)
    for _ in range(2):  # one node-wide list serves both readings (a scrape's pods)
        read = stats.pod_usage(record(), IDS, lambda: pytest.fail("the cgroup is not read"))
        assert read.pod == Usage(12, 120, 4, 1.0)
        assert read.containers == {"main": Usage(7, 70, 0, 2.0), "side": Usage(3, 30, 0, 2.0)}
        assert read.ids == {"main": "c-main", "side": "c-side"}
    assert selectors == [{"kubenode.io/node": "node-a"}]


def test_a_pod_new_since_the_nodes_list_is_asked_for_alone() -> None:
    selectors = []

    def call(method: str, request: Any) -> Any:
        selector = dict(request.filter.label_selector)
        selectors.append(selector)
        found = [sandbox_stats("u1", LISTED)] if "io.kubernetes.pod.uid" in selector else []
        return cri.ListPodSandboxStatsResponse(stats=found)

    read = CRIStats(call, "node-a", clock=lambda: 0.0).pod_usage(record(), IDS, lambda: pytest.fail("no"))
    assert read.pod.cpu_ns == 12
    assert selectors == [
        {"kubenode.io/node": "node-a"},
        {"kubenode.io/node": "node-a", "io.kubernetes.pod.uid": "u1"},
    ]


def test_without_sandbox_stats_the_pod_cgroup_and_list_container_stats_answer() -> None:
    calls = []

    def call(method: str, request: Any) -> Any:
        calls.append(method)
        if method == "ListPodSandboxStats":
            raise CRIError("rpc error: code = UNIMPLEMENTED", grpc.StatusCode.UNIMPLEMENTED)
        return cri.ListContainerStatsResponse(stats=LISTED)

    stats = CRIStats(call, "node-a")
    cgroup = Usage(50, 500, 3, 5.0)
    for _ in range(2):
        read = stats.pod_usage(record(), IDS, lambda: (cgroup, {1, 2, 3}))
        assert read.pod == cgroup and set(read.containers) == {"main", "side"}
    assert calls == ["ListPodSandboxStats", "ListContainerStats", "ListContainerStats"]  # remembered


def test_a_runtime_that_is_away_is_an_error_not_a_fallback() -> None:
    def call(method: str, request: Any) -> Any:
        raise CRIError("rpc error: code = UNAVAILABLE", grpc.StatusCode.UNAVAILABLE)

    with pytest.raises(CRIError):
        CRIStats(call, "node-a").pod_usage(record(), IDS, lambda: (Usage(0, 0), set()))
