"""The agent's cgroup v2 backend against a real cgroup v2 kernel: the rules a file tree does not enforce.

Covered: detection; controllers enabled through each parent's cgroup.subtree_control (files of a
controller exist only then); the no-internal-processes rule (and the supervisor leaf that
satisfies it in a delegated subtree); cpuset.cpus.effective and affinity; memory.max with the
OOM killer and memory.oom.group; destroy of a pod that forks while it is killed (cgroup.kill);
pod listing, pids and cpu.stat usage.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cm.cgroups.api import CgroupError
from agent.cm.cgroups.delegation import SUPERVISOR_LEAF, leave_for_leaf
from agent.cm.cgroups.detect import detect_version
from agent.cm.cgroups.formulas import shares_to_weight
from agent.cm.cgroups.manager import PodCgroupManager, build_manager
from tests.agent_cgroups.support import container, guaranteed, pod
from tests.cgroup2_guest.conftest import Transcript
from tests.cgroup2_guest.support import (
    MOUNT,
    alive,
    cgroup_dir,
    flat_keyed,
    procs,
    python_code,
    read,
    spawn_in,
    wait_until,
)

NODE = {"cpu": 2000, "memory": 1 << 30}
SLEEP = ["sleep", "300"]


def manager(root: str, driver: str = "cgroupfs", pids_limit: int = -1) -> PodCgroupManager:
    made = build_manager(
        root,
        driver,  # type: ignore[arg-type]
        mount_root=MOUNT,
        version=None,  # detected: this must say 2 on the guest
        pids_limit=pids_limit,
        enforce_cpu_limits=True,
    )
    assert isinstance(made, PodCgroupManager)
    return made


@pytest.fixture
def pods(v2_root: str) -> Iterator[PodCgroupManager]:
    made = manager(v2_root)
    made.start(NODE)
    yield made
    for uid in made.list_pods():
        made.destroy(uid)
    made.stop_and_remove_root()


def enabled(cgroup: str) -> list[str]:
    return sorted(read(cgroup, "cgroup.subtree_control").split())


def test_detected_as_v2_with_the_controllers(transcript: Transcript) -> None:
    assert detect_version(MOUNT) == 2
    offered = read("/", "cgroup.controllers")
    transcript.line(f"kernel {os.uname().release}; {MOUNT} is cgroup2 (statfs magic), version detected: 2")
    transcript.line(f"controllers: {offered}; cpuset.cpus.effective: {read('/', 'cpuset.cpus.effective')}")


def test_controller_files_appear_only_once_the_parent_enables_them(
    v2_root: str, transcript: Transcript
) -> None:
    top = cgroup_dir(v2_root)
    top.mkdir()
    (top / "raw").mkdir()
    # A fresh cgroup enables nothing for its children: their cpu.max does not exist yet, and
    # writing it fails (ENOENT, or EACCES: cgroupfs refuses to create a file).
    assert enabled(v2_root) == []
    assert not (top / "raw" / "cpu.max").exists()
    with pytest.raises(OSError) as refused:
        (top / "raw" / "cpu.max").write_text("20000 100000")
    assert refused.value.errno in (errno.ENOENT, errno.EACCES)
    (top / "raw").rmdir()
    # The manager enables what it needs in every ancestor before it makes a level.
    pods = manager(f"{v2_root}/agent")
    pods.start(NODE)
    info = pods.ensure(guaranteed(200, 64 << 20))
    for cgroup in (v2_root, f"{v2_root}/agent", f"{v2_root}/agent/kubepods"):
        assert {"cpu", "cpuset", "memory", "pids"} <= set(enabled(cgroup)), cgroup
    assert read(info.name, "cpu.max") == "20000 100000"
    transcript.line(
        f"subtree_control of {v2_root}/agent/kubepods: {' '.join(enabled(v2_root + '/agent/kubepods'))}"
    )
    pods.destroy(info.uid)
    pods.stop_and_remove_root()


def test_no_internal_processes(pods: PodCgroupManager) -> None:
    info = pods.ensure(guaranteed(100))
    child = spawn_in(info.name, SLEEP)
    try:
        wait_until(lambda: child.pid in procs(info.name), 30, "the process in its pod cgroup")
        tier = info.name.rsplit("/", 1)[0]
        # kubepods has controllers enabled for its children: it may hold no process itself.
        with pytest.raises(OSError) as refused:
            (cgroup_dir(tier) / "cgroup.procs").write_text(str(child.pid))
        assert refused.value.errno == errno.EBUSY
        assert child.pid in procs(info.name)
    finally:
        child.kill()
        child.wait()


def test_delegated_cgroup_needs_the_supervisor_leaf(v2_root: str, transcript: Transcript) -> None:
    """Delegate=yes hands the agent a cgroup it runs in; it must leave it before enabling controllers."""
    handed = f"{v2_root}/agent.service"
    cgroup_dir(handed).mkdir(parents=True)
    for cgroup in ("/", v2_root):
        (cgroup_dir(cgroup) / "cgroup.subtree_control").write_text("+cpu +cpuset +memory +pids")
    agent_like = spawn_in(handed, SLEEP)
    try:
        wait_until(lambda: agent_like.pid in procs(handed), 30, "the stand-in agent in its handed cgroup")
        pods = manager(handed, "systemd")
        with pytest.raises(CgroupError, match=r"cgroup\.subtree_control.*busy"):
            pods.start(NODE)
        leave_for_leaf(MOUNT, handed, agent_like.pid)
        assert procs(f"{handed}/{SUPERVISOR_LEAF}") == {agent_like.pid}
        assert procs(handed) == set()
        pods.start(NODE)
        info = pods.ensure(pod(container(requests={"cpu": 100})))
        assert info.name == f"{handed}/kubepods.slice/kubepods-burstable.slice/" + (
            f"kubepods-burstable-pod{info.uid.replace('-', '_')}.slice"
        )
        assert {"cpu", "memory", "pids", "cpuset"} <= set(enabled(handed))
        transcript.line(f"delegated: agent in {handed.rsplit('/', 1)[1]}/{SUPERVISOR_LEAF}, pods beside it")
        pods.destroy(info.uid)
        pods.stop_and_remove_root()
    finally:
        agent_like.kill()
        agent_like.wait()


def test_pod_and_tier_files(pods: PodCgroupManager, v2_root: str, transcript: Transcript) -> None:
    guaranteed_pod = pods.ensure(guaranteed(250, 64 << 20))
    files = ("cpu.weight", "cpu.max", "memory.max", "pids.max")
    assert [read(guaranteed_pod.name, f) for f in files] == ["10", "25000 100000", str(64 << 20), "max"]
    burstable = pods.ensure(pod(container(requests={"cpu": 1000})))
    assert [read(burstable.name, f) for f in files] == ["39", "max 100000", "max", "max"]
    kubepods = f"{v2_root}/kubepods"
    assert read(kubepods, "cpu.weight") == str(shares_to_weight(2048))
    assert read(kubepods, "memory.max") == str(1 << 30)
    assert read(f"{kubepods}/besteffort", "cpu.weight") == "1"
    pods.update_qos_cgroups([pod(container(requests={"cpu": 1000}))])
    assert read(f"{kubepods}/burstable", "cpu.weight") == "39"
    # Drift on the real files is repaired by the next ensure.
    (cgroup_dir(guaranteed_pod.name) / "cpu.max").write_text("max")
    pods.ensure(guaranteed(250, 64 << 20, uid=guaranteed_pod.uid))
    assert read(guaranteed_pod.name, "cpu.max") == "25000 100000"


def test_cpuset_effective_and_affinity(pods: PodCgroupManager, v2_root: str) -> None:
    all_cpus = read("/", "cpuset.cpus.effective")
    pinned = guaranteed(1000)
    info = pods.ensure(pinned, cpuset="1")
    assert (read(info.name, "cpuset.cpus"), read(info.name, "cpuset.cpus.effective")) == ("1", "1")
    child = spawn_in(info.name, SLEEP)
    try:
        wait_until(lambda: os.sched_getaffinity(child.pid) == {1}, 30, "affinity {1}")
        # Back to the parent's CPUs while the process runs. The kernel refuses to empty a populated
        # cpuset (ENOSPC; this failed before agent/cm/cgroups/v2.py wrote the parent's CPUs instead).
        with pytest.raises(OSError) as refused:
            (cgroup_dir(info.name) / "cpuset.cpus").write_text("\n")
        assert refused.value.errno == errno.ENOSPC
        pods.ensure(pinned, cpuset=None)
        assert read(info.name, "cpuset.cpus") == all_cpus
        assert read(info.name, "cpuset.cpus.effective") == all_cpus
        wait_until(lambda: len(os.sched_getaffinity(child.pid)) == os.cpu_count(), 30, "every CPU")
    finally:
        child.kill()
        child.wait()
    outside = guaranteed(100)
    with pytest.raises(CgroupError, match=r"cpuset\.cpus.*not in the parent"):
        pods.ensure(outside, cpuset="7")
    assert not pods.exists(outside)


def test_memory_max_and_oom_group(pods: PodCgroupManager, transcript: Transcript) -> None:
    info = pods.ensure(guaranteed(500, 32 << 20))
    assert read(info.name, "memory.max") == str(32 << 20)
    # The agent leaves memory.oom.group at 0 on pod cgroups, as the kubelet does for pod-level
    # cgroups: the OOM killer takes the biggest process, and the pod's other processes live on.
    assert read(info.name, "memory.oom.group") == "0"
    sibling = spawn_in(info.name, SLEEP)
    hog = spawn_in(info.name, python_code("b = b'x' * (200 << 20)"))
    try:
        assert hog.wait(120) == -signal.SIGKILL
        assert flat_keyed(info.name, "memory.events")["oom_kill"] >= 1
        assert alive(sibling.pid)
        transcript.line(
            f"memory.max {32 << 20}: a 200 MiB writer was OOM-killed (memory.events oom_kill="
            f"{flat_keyed(info.name, 'memory.events')['oom_kill']}), its sibling lived (memory.oom.group 0)"
        )
        # With memory.oom.group 1 the kernel kills the whole cgroup together.
        (cgroup_dir(info.name) / "memory.oom.group").write_text("1")
        group_hog = spawn_in(info.name, python_code("b = b'x' * (200 << 20)"))
        assert group_hog.wait(120) == -signal.SIGKILL
        assert sibling.wait(60) == -signal.SIGKILL
    finally:
        for child in (sibling, hog):
            if child.poll() is None:
                child.kill()
                child.wait()


def test_destroy_kills_a_pod_that_keeps_forking(v2_root: str) -> None:
    pods = manager(v2_root, pids_limit=256)
    pods.start(NODE)
    info = pods.ensure(pod(container()))
    storm = spawn_in(info.name, ["sh", "-c", "while :; do sleep 300 & done"])
    wait_until(lambda: len(procs(info.name)) > 50, 60, "the pod to fork 50 processes")
    started = time.monotonic()
    pods.destroy(info.uid)
    assert not cgroup_dir(info.name).exists()
    assert storm.wait(30) == -signal.SIGKILL
    assert time.monotonic() - started < 30
    pods.stop_and_remove_root()


def test_listing_pids_and_usage(pods: PodCgroupManager) -> None:
    info = pods.ensure(pod(container(requests={"cpu": 100})))
    busy = spawn_in(info.name, ["sh", "-c", "while :; do :; done"])
    try:
        assert pods.list_pods() == {info.uid: info}
        wait_until(lambda: pods.pids(info.uid) == {busy.pid}, 30, "the pid listed")
        wait_until(lambda: pods.cpu_usage_ns(info.uid) > 10_000_000, 60, "cpu.stat usage to grow")
        assert pods.read_limits(info.uid)["cpu_quota"] == "max"
    finally:
        busy.kill()
        busy.wait()
    pods.destroy(info.uid)
    assert pods.list_pods() == {}
    assert not Path(cgroup_dir(info.name)).exists()
