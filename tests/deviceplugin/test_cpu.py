"""The cpu backend on this machine's sysfs and on a fake sysfs tree (2 NUMA nodes, SMT siblings)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.cm.devicemanager import PodRef
from deviceplugin.backend import Device
from deviceplugin.backends.cpu import CPUSET_ANNOTATION, CpuBackend
from deviceplugin.config import CpuOptions
from deviceplugin.manager import PluginManager
from kubenode.cpuset import format_cpuset, parse_cpuset
from kubenode.devicecontract import CPUSET_ENV
from tests.deviceplugin.conftest import Kubelet

# node0: CPUs 0-3, node1: CPUs 4-7; siblings (0,2) (1,3) (4,6) (5,7), numbered as many Intel machines do.
SIBLINGS = {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3", 4: "4,6", 5: "5,7", 6: "4,6", 7: "5,7"}


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> Path:
    cpu_dir = tmp_path / "devices/system/cpu"
    for cpu, siblings in SIBLINGS.items():
        (cpu_dir / f"cpu{cpu}/topology").mkdir(parents=True)
        (cpu_dir / f"cpu{cpu}/topology/thread_siblings_list").write_text(siblings + "\n")
    (cpu_dir / "online").write_text("0-7\n")
    for node, cpus in ((0, "0-3"), (1, "4-7")):
        (tmp_path / f"devices/system/node/node{node}").mkdir(parents=True)
        (tmp_path / f"devices/system/node/node{node}/cpulist").write_text(cpus + "\n")
    return tmp_path


def ids(devices: list[Device]) -> list[str]:
    return [d.id for d in devices]


def test_cpuset_format_round_trip() -> None:
    assert format_cpuset({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert parse_cpuset("0-2,5,7-8\n") == {0, 1, 2, 5, 7, 8}
    assert format_cpuset([]) == ""
    with pytest.raises(ValueError, match="'3-1'"):
        parse_cpuset("3-1")


def test_threads_with_numa_and_reserved(fake_sysfs: Path) -> None:
    backend = CpuBackend(CpuOptions(unit="thread", reserved=frozenset({0}), sysfs_root=str(fake_sysfs)))
    devices = {d.id: d.numa_nodes for d in backend.devices()}
    assert devices == {f"cpu{c}": ((0,) if c < 4 else (1,)) for c in range(1, 8)}


def test_cores_keep_siblings_and_skip_reserved(fake_sysfs: Path) -> None:
    backend = CpuBackend(CpuOptions(unit="core", reserved=frozenset({6}), sysfs_root=str(fake_sysfs)))
    assert ids(backend.devices()) == ["core0", "core1", "core5"]
    allocation = backend.allocate(["core0", "core5"])
    assert allocation.envs == {CPUSET_ENV: "0,2,5,7"}
    assert allocation.annotations == {CPUSET_ANNOTATION: "0,2,5,7"}


@pytest.mark.parametrize(
    ("unavailable", "must", "size", "expected"),
    [
        ((), (), 2, ["cpu0", "cpu2"]),  # one whole core
        ((), (), 4, ["cpu0", "cpu2", "cpu1", "cpu3"]),  # one whole NUMA node
        ((), ("cpu5",), 2, ["cpu5", "cpu7"]),  # the sibling of a must-include CPU
        (("cpu0",), (), 3, ["cpu1", "cpu3", "cpu2"]),  # the tighter node, whole core first
        ((), (), 6, ["cpu0", "cpu2", "cpu1", "cpu3", "cpu4", "cpu6"]),  # spill over with a whole core
        (("cpu0", "cpu1"), (), 1, ["cpu2"]),  # a lone thread before breaking up a full core
    ],
)
def test_preferred_packs_numa_and_siblings(
    fake_sysfs: Path, unavailable: tuple[str, ...], must: tuple[str, ...], size: int, expected: list[str]
) -> None:
    backend = CpuBackend(CpuOptions(sysfs_root=str(fake_sysfs)))
    available = [d for d in backend.devices() if d.id not in unavailable]
    assert backend.preferred(available, list(must), size) == expected


def test_real_sysfs_advertises_every_online_cpu() -> None:
    backend = CpuBackend(CpuOptions(cdi=False))  # nothing of the host's /var/run/cdi
    online = parse_cpuset(Path("/sys/devices/system/cpu/online").read_text())
    assert ids(backend.devices()) == [f"cpu{c}" for c in sorted(online)]
    assert len(online) == os.cpu_count()
    has_numa = Path("/sys/devices/system/node/node0").exists()
    assert all(bool(d.numa_nodes) == has_numa for d in backend.devices())


def test_kubelet_allocates_a_cpuset(kubelet: Kubelet, run_plugin: Callable[..., PluginManager]) -> None:
    run_plugin({"resources": [{"name": "kubenode.io/cpu", "backend": "cpu"}]})
    assert kubelet.manager.wait_for_resource("kubenode.io/cpu", 5)
    options = kubelet.manager.allocate(PodRef("uid-cpu", "default", "pinned"), "main", {"kubenode.io/cpu": 1})
    cpus = parse_cpuset(options.envs[CPUSET_ENV])
    assert len(cpus) == 1 and cpus <= parse_cpuset(Path("/sys/devices/system/cpu/online").read_text())
    assert options.annotations[CPUSET_ANNOTATION] == options.envs[CPUSET_ENV]
