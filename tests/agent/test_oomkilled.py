"""A container the kernel's OOM killer ends is terminated with reason OOMKilled and exit code 137."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from agent.cm.cgroups import PodCgroups
from agent.cm.cgroups.files import read_flat_key
from agent.container.downwardapi import HostInfo
from agent.container.podrecord import TERMINATED, PodRecord, RecordStore
from agent.kuberuntime.processes import HOST_LAUNCHER, ContainerProcess
from agent.kuberuntime.runtime import ProcessRuntime
from harness.manifests import write_manifest
from kubenode.cgroupsweep import V1_MOUNT
from kubenode.model import Container, Pod
from tests.agent.support import Harness, wait_until


def test_a_pod_over_its_memory_limit_ends_oomkilled(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    harness = make_harness().start()
    hog: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hog"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    # 200 MiB of touched memory against a 32 MiB limit.
                    "command": ["python3", "-c", "x = b'a' * (200 << 20); print(len(x))"],
                    "resources": {"limits": {"memory": "32Mi", "cpu": "500m"}},
                }
            ],
        },
    }
    write_manifest(manifests, "hog.yaml", json.dumps(hog))
    item = harness.wait_phase("hog", "Failed", timeout=30)
    terminated = item["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)
    # A container that exits on its own with an error is not mistaken for one the OOM killer ended
    # ($$$$ is kube's escape for the shell's $$).
    fails = {**hog, "metadata": {"name": "fails"}}
    fails["spec"] = {
        **hog["spec"],
        "containers": [{**hog["spec"]["containers"][0], "command": ["sh", "-c", "kill -9 $$$$"]}],
    }
    write_manifest(manifests, "fails.yaml", json.dumps(fails))
    item = harness.wait_phase("fails", "Failed", timeout=30)
    terminated = item["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("Error", 137)


def test_oom_kill_counts_are_read_from_v1_and_v2_files(tmp_path: Path) -> None:
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n")
    (tmp_path / "old.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")  # before kernel 4.13
    assert read_flat_key(str(tmp_path), "memory.oom_control", "oom_kill") == 3
    assert read_flat_key(str(tmp_path), "memory.events", "oom_kill") == 2
    assert read_flat_key(str(tmp_path), "old.oom_control", "oom_kill") == 0


class OomBeforeSpawnReturns:
    """The host launcher, except that spawn returns only once the kernel's OOM killer has ended the process:
    the ordering a loaded node produces when the container is killed before the runtime's thread runs
    again."""

    def __init__(self, memory_cgroup: Path) -> None:
        self.memory_cgroup = memory_cgroup

    def spawn(self, *args: Any, **kwargs: Any) -> ContainerProcess:
        proc = HOST_LAUNCHER.spawn(*args, **kwargs)
        wait_until(lambda: proc.poll() is not None, 30, "the OOM killer to end the container")
        assert read_flat_key(str(self.memory_cgroup), "memory.oom_control", "oom_kill") == 1
        return proc

    def signal(self, pid: int, sig: signal.Signals) -> None:
        HOST_LAUNCHER.signal(pid, sig)


@pytest.fixture
def memory_cgroup(cgroup_root: str) -> Iterator[Path]:
    """A v1 memory cgroup limited to 32 MiB (the sweep of `cgroup_root` removes it)."""
    path = V1_MOUNT / "memory" / cgroup_root.strip("/") / "podoom"
    path.mkdir(parents=True)
    (path / "memory.limit_in_bytes").write_text(str(32 << 20))
    yield path


class OneMemoryCgroup:
    """The container cgroups of a pod whose one container runs in `memory_cgroup`: the two calls the runtime
    makes around a start (the cgroup the process joins, its OOM kill count)."""

    def __init__(self, memory_cgroup: Path) -> None:
        self.memory_cgroup = memory_cgroup

    def ensure_container(self, *args: Any) -> list[str]:
        return [str(self.memory_cgroup / "cgroup.procs")]

    def container_oom_kills(self, uid: str, container: str) -> int:
        return read_flat_key(str(self.memory_cgroup), "memory.oom_control", "oom_kill")


def test_an_oom_kill_before_the_runtime_looks_again_is_still_oomkilled(
    tmp_path: Path, memory_cgroup: Path
) -> None:
    runtime = ProcessRuntime(
        tmp_path,
        RecordStore(tmp_path),
        HostInfo("n"),
        container_cgroups=cast(PodCgroups, OneMemoryCgroup(memory_cgroup)),
        launcher=OomBeforeSpawnReturns(memory_cgroup),
    )
    hog = ("python3", "-c", "x = b'a' * (200 << 20)")
    pod = Pod(name="hog", uid="u1", restart_policy="Never", containers=(Container("main", command=hog),))
    record = PodRecord("u1", "default", "hog")
    runtime.sync_containers(pod, record, [str(memory_cgroup / "cgroup.procs")], {})
    runtime.sync_containers(pod, record, [str(memory_cgroup / "cgroup.procs")], {})
    main = record.containers["main"]
    assert (main.state, main.reason, main.exit_code) == (TERMINATED, "OOMKilled", 137)
    assert record.phase == "Failed"
