"""A pod asking for kubenode.io/cpu gets exactly the CPUs the real CPU device plugin allocated."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from agent.cm.devicemanager import DeviceManager
from harness.manifests import write_manifest
from kubenode.cpuset import parse_cpuset
from tests.agent.support import MOUNT, Harness, pod_manifest, wait_until
from tests.deviceplugin.support import cpu_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cpu_plugin(short_dir: Path, tmp_path: Path) -> Iterator[DeviceManager]:
    manager = DeviceManager(short_dir, tmp_path / "devices")
    manager.start()
    plugin = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "deviceplugin", "--config", str(cpu_config(tmp_path))],
        cwd=REPO,
        env={"KUBENODE_KUBELET_DIR": str(short_dir), "PATH": "/usr/bin:/bin"},
    )
    try:
        if not manager.wait_for_resource("kubenode.io/cpu", 20):
            pytest.fail("the CPU device plugin did not register kubenode.io/cpu within 20 s")
        yield manager
    finally:
        plugin.terminate()
        try:
            plugin.wait(10)
        except subprocess.TimeoutExpired:
            plugin.kill()
            plugin.wait()
        manager.stop()


def environ(pid: int) -> dict[str, str]:
    return dict(psutil.Process(pid).environ())


def test_cpu_devices_pin_the_pod_cgroup_and_process(
    make_harness: Callable[..., Harness], manifests: Path, cpu_plugin: DeviceManager
) -> None:
    all_cpus = set(range(psutil.cpu_count() or 1))
    h = make_harness(devices=cpu_plugin).start()
    try:
        path = write_manifest(
            manifests, "two.yaml", pod_manifest("two", resources="{limits: {kubenode.io/cpu: 2}}")
        )
        item = h.wait_phase("two", "Running")
        pid = item["status"]["containerStatuses"][0]["pid"]
        cpuset = item["kubenode"]["cpuset"]
        assert len(parse_cpuset(cpuset)) == 2
        assert parse_cpuset(cpuset) <= all_cpus
        cgroup = MOUNT / "cpuset" / item["kubenode"]["cgroup"].lstrip("/")
        assert parse_cpuset((cgroup / "cpuset.cpus").read_text().strip()) == parse_cpuset(cpuset)
        assert set(psutil.Process(pid).cpu_affinity()) == parse_cpuset(cpuset)
        assert environ(pid)["KUBENODE_CPUSET"] == cpuset
        assert sorted(item["kubenode"]["devices"]["main"]["kubenode.io/cpu"]) == sorted(
            f"cpu{c}" for c in parse_cpuset(cpuset)
        )
        # Removing the pod frees its CPUs; a one-CPU pod then gets exactly one.
        path.unlink()
        wait_until(lambda: cpu_plugin.available().get("kubenode.io/cpu") == len(all_cpus), 10, "CPUs freed")
        write_manifest(manifests, "one.yaml", pod_manifest("one", resources="{limits: {kubenode.io/cpu: 1}}"))
        one = h.wait_phase("one", "Running")
        one_pid = one["status"]["containerStatuses"][0]["pid"]
        cpus = parse_cpuset(one["kubenode"]["cpuset"])
        assert len(cpus) == 1
        assert set(psutil.Process(one_pid).cpu_affinity()) == cpus
        # A pod asking for more CPUs than are left is rejected at admission.
        write_manifest(
            manifests, "greedy.yaml", pod_manifest("greedy", resources="{limits: {kubenode.io/cpu: 2}}")
        )
        greedy = h.wait_phase("greedy", "Failed")
        assert greedy["status"]["reason"] == "OutOfkubenode.io/cpu"
    finally:
        h.stop()


def test_pod_waits_for_a_late_device_plugin_then_gets_its_devices(
    make_harness: Callable[..., Harness], manifests: Path, short_dir: Path, tmp_path: Path
) -> None:
    manager = DeviceManager(short_dir, tmp_path / "devices")
    manager.start()
    h = make_harness(devices=manager).start()
    plugin = None
    try:
        write_manifest(
            manifests, "dongle.yaml", pod_manifest("dongle", resources="{limits: {example.com/dongle: 1}}")
        )
        waiting = wait_until(
            lambda: (p := h.pod("dongle")) and p["status"].get("reason") and p, 5, "pod status"
        )
        assert waiting["status"]["phase"] == "Pending"
        assert waiting["status"]["reason"] == "WaitingForDevicePlugin"
        plugin = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "deviceplugin", "--config", "tests/configs/static.yaml"],
            cwd=REPO,
            env={"KUBENODE_KUBELET_DIR": str(short_dir), "PATH": "/usr/bin:/bin"},
        )
        item = h.wait_phase("dongle", "Running", timeout=20)
        (device_id,) = item["kubenode"]["devices"]["main"]["example.com/dongle"]
        serial = {"dongle-0": "A0", "dongle-1": "A1"}[device_id]
        assert environ(item["status"]["containerStatuses"][0]["pid"])["DONGLE_SERIAL"] == serial
        spec = item["kubenode"]["deviceSpecs"]["main"][0]
        assert spec.split(":")[1] in ("/dev/dongle0", "/dev/dongle1")
    finally:
        h.stop()
        if plugin is not None:
            plugin.terminate()
            plugin.wait(10)
        manager.stop()


def test_exclusive_cpus_leave_the_shared_pool_and_come_back(
    make_harness: Callable[..., Harness], manifests: Path, cpu_plugin: DeviceManager
) -> None:
    all_cpus = set(range(psutil.cpu_count() or 1))
    assert len(all_cpus) >= 2, "this test needs at least two CPUs"

    def cpus_of(name: str) -> tuple[frozenset[int] | set[int], set[int]]:
        item = h.pod(name)
        assert item is not None
        cgroup = MOUNT / "cpuset" / item["kubenode"]["cgroup"].lstrip("/")
        pid = item["status"]["containerStatuses"][0]["pid"]
        return parse_cpuset((cgroup / "cpuset.cpus").read_text().strip()), set(
            psutil.Process(pid).cpu_affinity()
        )

    h = make_harness(devices=cpu_plugin).start()
    try:
        write_manifest(manifests, "shared.yaml", pod_manifest("shared"))
        h.wait_phase("shared", "Running")
        assert cpus_of("shared") == (all_cpus, all_cpus)
        path = write_manifest(
            manifests, "pinned.yaml", pod_manifest("pinned", resources="{limits: {kubenode.io/cpu: 1}}")
        )
        pinned = parse_cpuset(h.wait_phase("pinned", "Running")["kubenode"]["cpuset"])
        rest = all_cpus - pinned
        # The shared pod is moved off the exclusive CPU at once, not at the next periodic resync.
        wait_until(lambda: cpus_of("shared") == (rest, rest), 5, "the shared pod to leave the exclusive CPU")
        path.unlink()
        wait_until(
            lambda: cpus_of("shared") == (all_cpus, all_cpus), 10, "the shared pod to get every CPU back"
        )
    finally:
        h.stop()
