"""agent/eviction/podusage.py: what a round reads of each pod. Only a pod with a storage limit has its storage
read every round; memory and processes, and anyone's storage, only when a threshold makes the manager rank."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import pytest

from agent.cm.cgroups import PodCgroups
from agent.eviction.podusage import has_storage_limit, measure, pod_usage
from kubenode.model import Pod, parse_pod


class Cgroups:
    """The two reads ranking makes, counted (cast to PodCgroups where passed)."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def memory_working_set(self, uid: str) -> int:
        self.reads.append(f"memory {uid}")
        return 7 << 20

    def pids(self, uid: str) -> set[int]:
        self.reads.append(f"pids {uid}")
        return {1, 2, 3}


def make_pod(name: str, *, limits: dict[str, str] | None = None, size_limit: str | None = None) -> Pod:
    container: dict[str, object] = {"name": "main", "image": "x"}
    if limits:
        container["resources"] = {"limits": limits}
    spec: dict[str, object] = {"containers": [container]}
    if size_limit is not None:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {"sizeLimit": size_limit}}]
    return parse_pod({"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": spec})


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir()
    (tmp_path / "logs" / "main").mkdir(parents=True)
    (tmp_path / "logs" / "main" / "0.log").write_bytes(os.urandom(64 << 10))
    return tmp_path


def test_a_pod_without_storage_limits_costs_no_read_until_ranked(logs: Path) -> None:
    cgroups = Cgroups()
    pod = make_pod("plain")
    usage = pod_usage(pod, cast(PodCgroups, cgroups), logs / "logs", logs / "state")
    assert not has_storage_limit(usage)
    assert (usage.disk, usage.memory, usage.processes) == (0, 0, 0) and cgroups.reads == []
    measure(usage, "memory", cast(PodCgroups, cgroups), logs / "logs", logs / "state")
    measure(usage, "pids", cast(PodCgroups, cgroups), logs / "logs", logs / "state")
    assert (usage.memory, usage.processes) == (7 << 20, 3)
    assert cgroups.reads == ["memory uid-plain", "pids uid-plain"]  # read once for both
    measure(usage, "ephemeral-storage", cast(PodCgroups, cgroups), logs / "logs", logs / "state")
    assert usage.disk >= 64 << 10 and usage.container_disk["main"] == usage.disk


@pytest.mark.parametrize(
    "pod", [make_pod("limited", limits={"ephemeral-storage": "1Mi"}), make_pod("sized", size_limit="1Mi")]
)
def test_a_pod_with_a_storage_limit_has_its_storage_read_every_round(logs: Path, pod: Pod) -> None:
    cgroups = Cgroups()
    usage = pod_usage(pod, cast(PodCgroups, cgroups), logs / "logs", logs / "state")
    assert usage.storage_read and usage.container_disk["main"] >= 64 << 10
    assert cgroups.reads == []


def test_a_pod_not_placed_is_never_read(logs: Path) -> None:
    cgroups = Cgroups()
    usage = pod_usage(
        make_pod("queued", limits={"ephemeral-storage": "1Mi"}),
        cast(PodCgroups, cgroups),
        logs / "logs",
        logs / "state",
        placed=False,
    )
    for resource in ("memory", "ephemeral-storage"):
        measure(usage, resource, cast(PodCgroups, cgroups), logs / "logs", logs / "state")
    assert (usage.disk, usage.memory, cgroups.reads) == (0, 0, [])
