"""The kubelet's values land in the real v1 files for each QoS class; bad values never reach the kernel."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent.cm.cgroups.api import CgroupError
from agent.cm.cgroups.manager import PodCgroupManager
from agent.cm.cgroups.v1 import V1_CONTROLLERS
from tests.agent_cgroups.support import MOUNT, container, guaranteed, pod, read

UNLIMITED_MEMORY = "9223372036854771712"


@pytest.mark.parametrize(
    ("milli", "shares", "quota"),
    [(100, "102", "10000"), (250, "256", "25000"), (500, "512", "50000"), (1000, "1024", "100000")],
)
def test_guaranteed_files(manager: PodCgroupManager, milli: int, shares: str, quota: str) -> None:
    info = manager.ensure(guaranteed(milli, 96 << 20))
    assert info.name.endswith(f"/kubepods/pod{info.uid}")
    assert read("cpu", info.name, "cpu.shares") == shares
    assert read("cpu", info.name, "cpu.cfs_quota_us") == quota
    assert read("cpu", info.name, "cpu.cfs_period_us") == "100000"
    assert read("memory", info.name, "memory.limit_in_bytes") == str(96 << 20)
    assert read("pids", info.name, "pids.max") == "max"


def test_burstable_without_all_limits(manager: PodCgroupManager) -> None:
    burstable = pod(
        container("a", requests={"cpu": 250}, limits={"cpu": 500}), container("b", requests={"cpu": 100})
    )
    info = manager.ensure(burstable)
    assert info.name.endswith(f"/kubepods/burstable/pod{burstable.uid}")
    assert read("cpu", info.name, "cpu.shares") == "358"  # 350m of requests
    assert read("cpu", info.name, "cpu.cfs_quota_us") == "-1"
    assert read("memory", info.name, "memory.limit_in_bytes") == UNLIMITED_MEMORY


def test_burstable_with_all_limits(manager: PodCgroupManager) -> None:
    burstable = pod(
        container(requests={"cpu": 100, "memory": 32 << 20}, limits={"cpu": 250, "memory": 64 << 20})
    )
    info = manager.ensure(burstable)
    assert read("cpu", info.name, "cpu.shares") == "102"
    assert read("cpu", info.name, "cpu.cfs_quota_us") == "25000"
    assert read("memory", info.name, "memory.limit_in_bytes") == str(64 << 20)


def test_best_effort_and_pids_limit(make_manager: Callable[..., PodCgroupManager]) -> None:
    manager = make_manager(pids_limit=64)
    best_effort = pod(container())
    info = manager.ensure(best_effort)
    assert info.name.endswith(f"/kubepods/besteffort/pod{best_effort.uid}")
    assert read("cpu", info.name, "cpu.shares") == "2"
    assert read("cpu", info.name, "cpu.cfs_quota_us") == "-1"
    assert read("pids", info.name, "pids.max") == "64"
    assert manager.read_limits(best_effort.uid)["pids_limit"] == "64"


def test_qos_tiers(manager: PodCgroupManager) -> None:
    root = manager.name_for(guaranteed(100)).rsplit("/", 1)[0]  # .../kubepods
    assert read("cpu", root, "cpu.shares") == "2048"  # MilliCPUToShares(2000m allocatable)
    assert read("memory", root, "memory.limit_in_bytes") == str(16 << 30)
    assert read("cpu", root + "/besteffort", "cpu.shares") == "2"
    pods = [
        pod(container(requests={"cpu": 250})),
        pod(container(requests={"cpu": 500}, limits={"cpu": 1000})),
        guaranteed(1000),  # not burstable: does not count
        pod(container()),  # best effort: does not count
    ]
    manager.update_qos_cgroups(pods)
    assert read("cpu", root + "/burstable", "cpu.shares") == "768"  # MilliCPUToShares(750)
    manager.update_qos_cgroups([])
    assert read("cpu", root + "/burstable", "cpu.shares") == "2"


def test_drifted_limits_are_repaired(manager: PodCgroupManager) -> None:
    pod_ = guaranteed(500)
    info = manager.ensure(pod_)
    cpu_dir = f"/sys/fs/cgroup/cpu{info.name}"
    with open(f"{cpu_dir}/cpu.cfs_quota_us", "w") as handle:
        handle.write("-1")
    with open(f"{cpu_dir}/cpu.shares", "w") as handle:
        handle.write("4096")
    assert manager.ensure(pod_) == info
    assert read("cpu", info.name, "cpu.cfs_quota_us") == "50000"
    assert read("cpu", info.name, "cpu.shares") == "512"


@pytest.mark.parametrize(
    ("bad", "file"),
    [
        ({"cpu_shares": 1}, "cpu.shares"),
        ({"cpu_shares": 262145}, "cpu.shares"),
        ({"cpu_quota": 999}, "cpu.cfs_quota_us"),
        ({"cpu_period": 999}, "cpu.cfs_quota_us"),
        ({"cpu_period": 1000001}, "cpu.cfs_quota_us"),
        ({"memory_limit": 0}, "memory.limit_in_bytes"),
        ({"pids_limit": 0}, "pids.max"),
        ({"cpuset_cpus": "7"}, "cpuset.cpus"),
        ({"cpuset_cpus": "0-x"}, "cpuset.cpus"),
    ],
)
def test_invalid_values_are_refused_before_writing(
    manager: PodCgroupManager, bad: dict[str, object], file: str
) -> None:
    pod_ = guaranteed(500)
    info = manager.ensure(pod_)
    dirs = tuple(info.name.strip("/").split("/"))
    good = manager.resource_config(pod_, None)
    with pytest.raises(CgroupError, match=file.replace(".", r"\.")) as caught:
        manager.backend.validate(dirs, replace(good, **bad))  # type: ignore[arg-type]
    assert info.name in str(caught.value)
    assert read("cpu", info.name, "cpu.shares") == "512"


def test_bad_cpuset_creates_nothing(manager: PodCgroupManager) -> None:
    pod_ = guaranteed(500)
    with pytest.raises(CgroupError, match=r"cpuset\.cpus"):
        manager.ensure(pod_, cpuset="5")
    assert not manager.exists(pod_)


def test_a_create_failing_part_way_removes_what_it_made(
    manager: PodCgroupManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cpu, cpuacct and cpuset are made before memory; an injected mkdir failure there must not
    # leave the pod's directories in the first hierarchies until the pod terminates.
    pod_ = guaranteed(100)
    leaf = manager.name_for(pod_).strip("/")
    backend: Any = manager.backend
    real_make = backend._make
    made: list[str] = []

    def make(controller: str, dirs: tuple[str, ...]) -> bool:
        if "/".join(dirs) == leaf:
            if controller == "memory":
                raise CgroupError("/" + leaf, "(memory mkdir)", "injected failure")
            made.append(controller)
        return bool(real_make(controller, dirs))

    monkeypatch.setattr(backend, "_make", make)
    with pytest.raises(CgroupError, match="injected failure"):
        manager.ensure(pod_)
    assert "cpu" in made and "cpuset" in made  # the failure really came part-way
    assert not [name for name in V1_CONTROLLERS if (MOUNT / name / leaf).exists()]
    assert pod_.uid not in manager.list_pods()
    monkeypatch.undo()
    assert manager.ensure(pod_).name == "/" + leaf  # a retry starts clean


def test_a_failed_write_leaves_an_existing_pod_cgroup_alone(
    manager: PodCgroupManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod_ = guaranteed(100)
    manager.ensure(pod_)

    def fail(dirs: tuple[str, ...], config: object) -> None:
        raise CgroupError(manager.name_for(pod_), "cpu.shares", "injected failure")

    monkeypatch.setattr(manager.backend, "write", fail)
    with pytest.raises(CgroupError, match="injected failure"):
        manager.ensure(pod_)
    assert manager.exists(pod_)  # it may hold the pod's processes: only a fresh one is undone


def test_child_quota_above_parent_is_refused(manager: PodCgroupManager) -> None:
    # kubepods with a 0.5 CPU quota: a 1-CPU pod would get EINVAL from the kernel; we refuse it first.
    kubepods = manager.name_for(guaranteed(100)).rsplit("/", 1)[0]
    with open(f"/sys/fs/cgroup/cpu{kubepods}/cpu.cfs_quota_us", "w") as handle:
        handle.write("50000")
    pod_ = guaranteed(1000)
    with pytest.raises(CgroupError, match=r"cpu\.cfs_quota_us.*exceeds the parent"):
        manager.ensure(pod_)
    assert not manager.exists(pod_)
    assert manager.ensure(guaranteed(250)).name


def test_kernel_errors_name_cgroup_and_file(manager: PodCgroupManager) -> None:
    # A v1 cpuset parent may not drop CPUs a child cgroup uses: the kernel says EBUSY.
    pod_ = guaranteed(100)
    info = manager.ensure(pod_)
    child = f"/sys/fs/cgroup/cpuset{info.name}/sub"
    os.mkdir(child)
    Path(child, "cpuset.mems").write_text("0")
    Path(child, "cpuset.cpus").write_text("1")
    with pytest.raises(CgroupError, match=r"cpuset\.cpus: Device or resource busy") as caught:
        manager.ensure(pod_, cpuset="0")
    assert info.name in str(caught.value)


def test_an_unchanged_qos_tier_is_left_alone_until_its_recheck(
    manager: PodCgroupManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = manager.name_for(guaranteed(100)).rsplit("/", 1)[0]
    pods = [pod(container(requests={"cpu": 250}))]
    manager.update_qos_cgroups(pods)
    assert read("cpu", root + "/burstable", "cpu.shares") == "256"
    with open(f"/sys/fs/cgroup/cpu{root}/burstable/cpu.shares", "w") as handle:
        handle.write("999")  # drift by another writer
    manager.update_qos_cgroups(pods)  # same wanted shares, checked a moment ago: not looked at again
    assert read("cpu", root + "/burstable", "cpu.shares") == "999"
    manager.update_qos_cgroups([*pods, pod(container(requests={"cpu": 250}))])  # the shares change: written
    assert read("cpu", root + "/burstable", "cpu.shares") == "512"
    with open(f"/sys/fs/cgroup/cpu{root}/burstable/cpu.shares", "w") as handle:
        handle.write("999")
    monkeypatch.setattr("agent.cm.cgroups.manager.QOS_RECHECK_S", 0.0)  # the recheck is due: drift repaired
    manager.update_qos_cgroups([*pods, pod(container(requests={"cpu": 250}))])
    assert read("cpu", root + "/burstable", "cpu.shares") == "512"


def test_a_new_pod_cgroup_is_written_from_the_kernels_defaults(manager: PodCgroupManager) -> None:
    # A new cgroup is not read back before its limits are written (its files hold the kernel's defaults):
    # the files must still end up holding every value.
    pod_ = guaranteed(250, 64 << 20)
    info = manager.ensure(pod_, cpuset="0")
    expected = {
        ("cpu", "cpu.shares"): "256",
        ("cpu", "cpu.cfs_quota_us"): "25000",
        ("cpu", "cpu.cfs_period_us"): "100000",
        ("memory", "memory.limit_in_bytes"): str(64 << 20),
        ("cpuset", "cpuset.cpus"): "0",
    }
    for (controller, file), value in expected.items():
        assert read(controller, info.name, file) == value, file
    best_effort = pod(container())
    info = manager.ensure(best_effort)
    assert read("cpu", info.name, "cpu.shares") == "2"
    assert read("cpu", info.name, "cpu.cfs_quota_us") == "-1"
    assert read("memory", info.name, "memory.limit_in_bytes") == UNLIMITED_MEMORY
