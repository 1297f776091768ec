"""Processes inside real pod cgroups: CPU quota enforcement, cpuset affinity, listing, destroying."""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from agent.cm.cgroups.files import read_pids, tree_pids
from agent.cm.cgroups.manager import PodCgroupManager
from agent.cm.cgroups.v1 import V1_CONTROLLERS
from kubenode.cgroupsweep import removed_meanwhile
from tests.agent_cgroups.support import MOUNT, container, guaranteed, pod, read, spawn_in

MEASURE_S = 2.5


def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_200m_limit_holds_a_busy_loop_to_a_fifth_of_a_cpu(manager: PodCgroupManager) -> None:
    limited = guaranteed(200)
    manager.ensure(limited)
    child = spawn_in(manager.procs_files(limited))
    try:
        wait_for(lambda: manager.cpu_usage_ns(limited.uid) > 0)
        start_usage, start = manager.cpu_usage_ns(limited.uid), time.monotonic()
        time.sleep(MEASURE_S)  # the measurement window itself, not a wait for an event
        used = (manager.cpu_usage_ns(limited.uid) - start_usage) / 1e9 / (time.monotonic() - start)
        throttled = dict(
            line.split() for line in read("cpu", manager.name_for(limited), "cpu.stat").splitlines()
        )
        print(f"200m busy loop: {used:.3f} CPU over {MEASURE_S} s, nr_throttled={throttled['nr_throttled']}")
        assert 0.1 < used <= 0.25
        assert int(throttled["nr_throttled"]) > 0
    finally:
        manager.destroy(limited.uid)
    assert child.wait(timeout=5) == -signal.SIGKILL


@pytest.mark.parametrize("cpu", ["0", "1"])
def test_cpuset_pins_the_pod_and_its_processes(manager: PodCgroupManager, cpu: str) -> None:
    pinned = guaranteed(1000)
    info = manager.ensure(pinned, cpuset=cpu)
    assert read("cpuset", info.name, "cpuset.cpus") == cpu
    child = spawn_in(manager.procs_files(pinned), "import time; time.sleep(60)")
    try:
        wait_for(lambda: child.pid in manager.pids(pinned.uid))
        assert os.sched_getaffinity(child.pid) == {int(cpu)}
        assert manager.read_limits(pinned.uid)["cpuset"] == cpu
    finally:
        manager.destroy(pinned.uid)
        child.wait(timeout=5)


def test_without_allocation_the_parent_cpus_are_copied(manager: PodCgroupManager) -> None:
    shared = pod(container(requests={"cpu": 100}))
    info = manager.ensure(shared)
    parent_cpus = (MOUNT / "cpuset" / "cpuset.cpus").read_text().strip()
    tier = info.name.rsplit("/", 1)[0]
    for cgroup in (tier, info.name):
        assert read("cpuset", cgroup, "cpuset.cpus") == parent_cpus
        assert read("cpuset", cgroup, "cpuset.mems") == (MOUNT / "cpuset" / "cpuset.mems").read_text().strip()
    # A fresh cpuset child refuses tasks (ENOSPC) until it has cpus/mems: attaching works here.
    child = spawn_in(manager.procs_files(shared), "import time; time.sleep(60)")
    try:
        wait_for(lambda: child.pid in manager.pids(shared.uid))
        assert os.sched_getaffinity(child.pid) == set(range(os.cpu_count() or 1))
    finally:
        manager.destroy(shared.uid)
        child.wait(timeout=5)


@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
def test_list_pods_finds_pods_and_pids_for_adoption(
    make_manager: Callable[..., PodCgroupManager], driver: str
) -> None:
    manager = make_manager(driver)
    manager.start({"cpu": 2000})
    pods = [guaranteed(100), pod(container(requests={"cpu": 100})), pod(container())]
    infos = {p.uid: manager.ensure(p) for p in pods}
    if driver == "systemd":
        escaped = pods[1].uid.replace("-", "_")
        tail = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice"
        assert infos[pods[1].uid].name.endswith(tail)
    child = spawn_in(manager.procs_files(pods[1]), "import time; time.sleep(60)")
    try:
        # A fresh manager (an agent restart) sees the same pods, QoS and names.
        restarted = make_manager(driver)
        assert restarted.list_pods() == infos
        wait_for(lambda: restarted.pids(pods[1].uid) == {child.pid})
        assert restarted.pids(pods[0].uid) == set()
    finally:
        manager.destroy(pods[1].uid)
        child.wait(timeout=5)


def test_signal_all_reaches_every_process(manager: PodCgroupManager) -> None:
    pod_ = guaranteed(500)
    manager.ensure(pod_)
    children = [spawn_in(manager.procs_files(pod_), "import time; time.sleep(60)") for _ in range(3)]
    wait_for(lambda: len(manager.pids(pod_.uid)) == 3)
    assert manager.signal_all(pod_.uid, signal.SIGTERM) == 3
    assert [child.wait(timeout=5) for child in children] == [-signal.SIGTERM] * 3


def test_destroy_kills_leftovers_and_removes_every_hierarchy(manager: PodCgroupManager) -> None:
    pod_ = pod(container(requests={"cpu": 100}))
    info = manager.ensure(pod_)
    # A process that ignores SIGTERM and a sub-cgroup with a task in it.
    stubborn = spawn_in(
        manager.procs_files(pod_), "import signal, time; signal.signal(15, signal.SIG_IGN); time.sleep(60)"
    )
    sub_procs = []
    for name in V1_CONTROLLERS:
        sub = MOUNT / name / info.name.strip("/") / "sub"
        sub.mkdir()
        if name == "cpuset":
            (sub / "cpuset.mems").write_text("0")
            (sub / "cpuset.cpus").write_text("0")
        sub_procs.append(str(sub / "cgroup.procs"))
    nested = spawn_in(sub_procs, "import time; time.sleep(60)")
    wait_for(lambda: manager.pids(pod_.uid) == {stubborn.pid, nested.pid})
    manager.destroy(pod_.uid)
    assert stubborn.wait(timeout=5) == -signal.SIGKILL
    assert nested.wait(timeout=5) == -signal.SIGKILL
    for name in V1_CONTROLLERS:
        assert not (MOUNT / name / info.name.strip("/")).exists(), name
    assert not manager.exists(pod_)
    assert pod_.uid not in manager.list_pods()
    manager.destroy(pod_.uid)  # idempotent


def test_destroy_removes_a_partially_created_pod(manager: PodCgroupManager) -> None:
    pod_ = guaranteed(100)
    info = manager.ensure(pod_)
    os.rmdir(MOUNT / "memory" / info.name.strip("/"))  # as if the agent died mid-create
    assert not manager.exists(pod_)
    assert manager.pids(pod_.uid) == set()
    manager.destroy(pod_.uid)
    assert not any((MOUNT / name / info.name.strip("/")).exists() for name in V1_CONTROLLERS)


def test_stop_and_remove_root_leaves_nothing(
    make_manager: Callable[..., PodCgroupManager], cgroup_root: str
) -> None:
    manager = make_manager()
    manager.start({"cpu": 1000})
    manager.destroy(manager.ensure(guaranteed(100)).uid)
    manager.stop_and_remove_root()
    assert not any((MOUNT / name / cgroup_root.strip("/")).exists() for name in V1_CONTROLLERS)


def test_root_can_be_made_again_after_removal(make_manager: Callable[..., PodCgroupManager]) -> None:
    manager = make_manager()
    for _ in range(2):  # `kubenode up` exiting and starting again in one process
        manager.start({"cpu": 1000})
        pod_ = guaranteed(100)
        manager.ensure(pod_)
        manager.destroy(pod_.uid)
        manager.stop_and_remove_root()


def test_parallel_ensure_on_a_fresh_root(make_manager: Callable[..., PodCgroupManager]) -> None:
    # Pod workers run in parallel, possibly before any tier exists: every cgroup must still get cpus.
    manager = make_manager()
    pods = [guaranteed(100) for _ in range(8)] + [pod(container(requests={"cpu": 100})) for _ in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        infos = list(pool.map(manager.ensure, pods))
    for info in infos:
        for cgroup in (info.name, info.name.rsplit("/", 1)[0]):
            assert read("cpuset", cgroup, "cpuset.cpus"), cgroup
    assert set(manager.list_pods()) == {p.uid for p in pods}


def test_a_cgroup_removed_while_it_is_read_holds_no_pids(cgroup_root: str) -> None:
    """The kernel's two answers for a cgroup removed under a reader: ENODEV once it went after the open,
    ENOENT before it; both read as an empty cgroup (runc and terminations remove cgroups during reads)."""
    path = MOUNT / "pids" / cgroup_root.strip("/") / "podgone"
    path.mkdir(parents=True)
    with open(path / "cgroup.procs", encoding="ascii") as handle:
        path.rmdir()
        with pytest.raises(OSError) as after_open:
            handle.read()
    assert after_open.value.errno == errno.ENODEV and removed_meanwhile(after_open.value)
    assert read_pids(str(path / "cgroup.procs")) == set()
    assert tree_pids(str(path)) == set()
