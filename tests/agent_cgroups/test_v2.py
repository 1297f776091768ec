"""cgroup v2 against a directory tree with cgroup2's files, and version detection on this host.

This host's cgroup2 mount (/sys/fs/cgroup/unified) offers only hugetlb, so the v2 limits are
tested on a plain directory tree. `FakeCgroup2Kernel` does what the kernel does on mkdir/rmdir
of a cgroup2 directory (creates/removes the interface files, inherits the enabled controllers
and effective cpuset, refuses to remove a populated cgroup); everything else the backend does is
ordinary file reads and writes, the same on the real mount.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cm.cgroups.api import CgroupError, ResourceConfig
from agent.cm.cgroups.detect import CGROUP2_SUPER_MAGIC, detect_version, filesystem_magic
from agent.cm.cgroups.formulas import shares_to_weight
from agent.cm.cgroups.manager import PodCgroupManager, build_manager
from agent.cm.cgroups.v2 import V2Hierarchies
from tests.agent_cgroups.support import container, guaranteed, pod, require_root_and_v1

ROOT_CONTROLLERS = "cpuset cpu io memory hugetlb pids rdma"
NEW_CGROUP_FILES = {
    "cgroup.subtree_control": "",
    "cgroup.procs": "",
    "cpu.weight": "100",
    "cpu.max": "max 100000",
    "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0",
    "memory.max": "max",
    "pids.max": "max",
    "cpuset.cpus": "",
    "cpuset.mems": "",
}


class FakeCgroup2Kernel:
    def mkdir(self, path: str) -> None:
        os.mkdir(path)
        parent = Path(path).parent
        enabled = " ".join(
            word.lstrip("+") for word in (parent / "cgroup.subtree_control").read_text().split()
        )
        files = dict(NEW_CGROUP_FILES, **{"cgroup.controllers": enabled})
        for name in ("cpuset.cpus.effective", "cpuset.mems.effective"):
            files[name] = (parent / name).read_text()
        for name, content in files.items():
            Path(path, name).write_text(content)

    def rmdir(self, path: str) -> None:
        directory = Path(path)
        if not directory.exists():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        if (directory / "cgroup.procs").read_text().strip() or any(p.is_dir() for p in directory.iterdir()):
            raise OSError(errno.EBUSY, "Device or resource busy", path)
        shutil.rmtree(directory)


@pytest.fixture
def mount() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="kn-v2-", dir="/tmp"))
    files = {
        "cgroup.controllers": ROOT_CONTROLLERS,
        "cgroup.subtree_control": "",
        "cgroup.procs": "1",
        "cpuset.cpus.effective": "0-3",
        "cpuset.mems.effective": "0",
    }
    for name, content in files.items():
        (top / name).write_text(content)
    yield top
    shutil.rmtree(top)


@pytest.fixture
def v2(mount: Path) -> PodCgroupManager:
    manager = PodCgroupManager(V2Hierarchies(mount, FakeCgroup2Kernel()), "/agent")
    manager.start({"cpu": 4000, "memory": 8 << 30})
    return manager


def files(mount: Path, cgroup: str, *names: str) -> list[str]:
    return [(mount / cgroup.strip("/") / name).read_text().strip() for name in names]


def test_guaranteed_pod_files(v2: PodCgroupManager, mount: Path) -> None:
    pod_ = guaranteed(250, 64 << 20)
    info = v2.ensure(pod_)
    assert info.name == f"/agent/kubepods/pod{pod_.uid}"
    assert files(mount, info.name, "cpu.weight", "cpu.max", "memory.max", "pids.max") == [
        "10",  # shares 256 -> weight 10
        "25000 100000",
        str(64 << 20),
        "max",
    ]
    for cgroup in ("", "/agent", "/agent/kubepods"):
        enabled = (mount / cgroup.strip("/") / "cgroup.subtree_control").read_text().split()
        assert sorted(enabled) == ["+cpu", "+cpuset", "+memory", "+pids"], (
            cgroup
        )  # io, rdma, hugetlb not needed
    assert files(mount, info.name, "cgroup.controllers") == ["cpu cpuset memory pids"]


def test_burstable_without_limits_is_unlimited(v2: PodCgroupManager, mount: Path) -> None:
    info = v2.ensure(pod(container(requests={"cpu": 1000})))
    assert files(mount, info.name, "cpu.weight", "cpu.max", "memory.max") == ["39", "max 100000", "max"]


@pytest.mark.parametrize(("shares", "weight"), [(2, "1"), (1024, "39"), (2048, "79"), (262144, "10000")])
def test_weight_conversion_on_disk(v2: PodCgroupManager, mount: Path, shares: int, weight: str) -> None:
    dirs = ("agent", "kubepods", "burstable")
    v2.backend.write(dirs, ResourceConfig(cpu_shares=shares))
    assert files(mount, "/agent/kubepods/burstable", "cpu.weight") == [weight]
    assert str(shares_to_weight(shares)) == weight


def test_tiers_and_pids_limit(mount: Path) -> None:
    manager = PodCgroupManager(V2Hierarchies(mount, FakeCgroup2Kernel()), "/agent", pids_limit=128)
    manager.start({"cpu": 4000, "memory": 8 << 30})
    assert files(mount, "/agent/kubepods", "cpu.weight", "memory.max") == [
        "157",
        str(8 << 30),
    ]  # 4000m -> 4096 shares -> 157
    assert files(mount, "/agent/kubepods/besteffort", "cpu.weight") == ["1"]
    best_effort = pod(container())
    info = manager.ensure(best_effort)
    assert files(mount, info.name, "cpu.weight", "pids.max", "cpu.max") == ["1", "128", "max 100000"]
    manager.update_qos_cgroups([pod(container(requests={"cpu": 2000}))])
    assert files(mount, "/agent/kubepods/burstable", "cpu.weight") == ["79"]


class CountingKernel(FakeCgroup2Kernel):
    def __init__(self) -> None:
        self.mkdirs: list[str] = []

    def mkdir(self, path: str) -> None:
        self.mkdirs.append(path)
        super().mkdir(path)


def test_a_pod_below_its_tiers_is_one_mkdir_and_a_tier_removed_behind_its_back_is_made_again(
    mount: Path,
) -> None:
    kernel = CountingKernel()
    manager = PodCgroupManager(V2Hierarchies(mount, kernel), "/agent")
    manager.start({"cpu": 4000, "memory": 8 << 30})
    manager.ensure(pod(container(requests={"cpu": 100})))  # the first Burstable pod makes its tier
    kernel.mkdirs.clear()
    info = manager.ensure(pod(container(requests={"cpu": 100})))
    assert kernel.mkdirs == [str(mount / info.name.strip("/"))]
    # The tier went (a hand, a cleanup script): the next pod's mkdir finds no parent, and the tier is made
    # again with its controllers enabled before the pod's cgroup is made below it.
    shutil.rmtree(mount / "agent/kubepods/burstable")
    second = manager.ensure(pod(container(requests={"cpu": 100})))
    enabled = (mount / "agent/kubepods/burstable/cgroup.subtree_control").read_text().split()
    assert sorted(enabled) == ["+cpu", "+cpuset", "+memory", "+pids"]
    assert files(mount, second.name, "cpu.weight") == [str(shares_to_weight(102))]


def test_cpuset_pin_and_refusal(v2: PodCgroupManager, mount: Path) -> None:
    pinned = guaranteed(2000)
    info = v2.ensure(pinned, cpuset="2,3")
    assert files(mount, info.name, "cpuset.cpus") == ["2-3"]
    other = guaranteed(1000)
    with pytest.raises(CgroupError, match=r"cpuset\.cpus.*not in the parent"):
        v2.ensure(other, cpuset="5")
    assert not v2.exists(other)


def test_unpinned_pod_gets_the_parents_cpus_spelled_out(v2: PodCgroupManager, mount: Path) -> None:
    # A real v2 kernel refuses to empty a populated cpuset (ENOSPC, found by the guest run:
    # tests/cgroup2_guest/guest_kernel_rules.py), so leaving a pin writes the parent's CPUs.
    pinned = guaranteed(2000)
    info = v2.ensure(pinned, cpuset="2,3")
    v2.ensure(pinned, cpuset=None)
    assert files(mount, info.name, "cpuset.cpus") == ["0-3"]
    never_pinned = v2.ensure(guaranteed(100))
    assert files(mount, never_pinned.name, "cpuset.cpus") == [""]  # empty: inherits


def test_drift_is_repaired(v2: PodCgroupManager, mount: Path) -> None:
    pod_ = guaranteed(500, 32 << 20)
    info = v2.ensure(pod_)
    (mount / info.name.strip("/") / "cpu.max").write_text("max 100000")
    (mount / info.name.strip("/") / "memory.max").write_text("max")
    v2.ensure(pod_)
    assert files(mount, info.name, "cpu.max", "memory.max") == ["50000 100000", str(32 << 20)]


@pytest.mark.parametrize(
    ("bad", "file"),
    [
        (ResourceConfig(cpu_shares=1), "cpu.weight"),
        (ResourceConfig(cpu_quota=10), "cpu.max"),
        (ResourceConfig(memory_limit=-5), "memory.max"),
        (ResourceConfig(pids_limit=0), "pids.max"),
    ],
)
def test_invalid_values_are_refused(v2: PodCgroupManager, bad: ResourceConfig, file: str) -> None:
    with pytest.raises(CgroupError, match=file.replace(".", r"\.")):
        v2.backend.validate(("agent", "kubepods", "burstable"), bad)


def test_listing_pids_usage_and_destroy(v2: PodCgroupManager, mount: Path) -> None:
    pods = [guaranteed(100), pod(container(requests={"cpu": 100})), pod(container())]
    infos = {p.uid: v2.ensure(p) for p in pods}
    assert v2.list_pods() == infos
    burstable_dir = mount / infos[pods[1].uid].name.strip("/")
    (burstable_dir / "cgroup.procs").write_text("4242\n4243\n")
    (burstable_dir / "cpu.stat").write_text("usage_usec 1500\nuser_usec 1000\nsystem_usec 500")
    assert v2.pids(pods[1].uid) == {4242, 4243}
    assert v2.cpu_usage_ns(pods[1].uid) == 1_500_000
    (burstable_dir / "memory.current").write_text("10485760\n")
    (burstable_dir / "memory.stat").write_text("anon 4096\nfile 8192\ninactive_file 2097152\nactive_file 0\n")
    assert v2.memory_working_set(pods[1].uid) == 10485760 - 2097152  # usage less inactive file pages
    assert v2.read_limits(pods[0].uid)["cpu_quota"] == "10000"
    (burstable_dir / "cgroup.procs").write_text("")
    for p in pods:
        v2.destroy(p.uid)
    assert v2.list_pods() == {}
    v2.stop_and_remove_root()
    assert not (mount / "agent").exists()


def test_this_host_is_detected_as_v1_hybrid() -> None:
    # /sys/fs/cgroup is a tmpfs holding v1 mounts plus cgroup2 at unified/: the kubelet's rule says v1.
    assert filesystem_magic(Path("/sys/fs/cgroup/unified")) == CGROUP2_SUPER_MAGIC
    assert filesystem_magic(Path("/sys/fs/cgroup")) != CGROUP2_SUPER_MAGIC
    assert detect_version(Path("/sys/fs/cgroup")) == 1
    assert detect_version(Path("/sys/fs/cgroup/unified")) == 2
    assert build_manager("/", "cgroupfs", mount_root=Path("/sys/fs/cgroup"), version=None, pids_limit=-1,
                         enforce_cpu_limits=True).version == 1  # type: ignore[attr-defined]  # fmt: skip


def test_real_cgroup2_mount_without_cpu_controller_fails_clearly() -> None:
    # The real cgroup2 mount here has no cpu/memory/pids controllers: ensure must say which file is
    # missing, and leave nothing behind.
    require_root_and_v1()
    unified = Path("/sys/fs/cgroup/unified")
    root = f"/kn-test-{uuid.uuid4().hex[:10]}"
    manager = PodCgroupManager(V2Hierarchies(unified), root)
    pod_ = guaranteed(100)
    try:
        with pytest.raises(CgroupError, match=r"cpu\.(weight|max)"):
            manager.ensure(pod_)
        assert not manager.exists(pod_)
    finally:
        manager.stop_and_remove_root()
    assert not (unified / root.strip("/")).exists()
