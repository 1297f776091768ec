"""A process pod's containers are isolated as runc isolates them (issue 37): each runs in a cgroup of its
own below the pod's, with its own limits, its device rules and its own /dev.

Real processes in real cgroup v1 hierarchies (the host's); the static device is a node made with mknod
from /dev/fuse's numbers (10:229), which no runtime allows by default, offered at another containerPath.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cm.cdidevices import CdiDevices
from agent.cm.cgroups.api import PodCgroups
from agent.container.downwardapi import HostInfo
from agent.container.podrecord import PodRecord, RecordStore
from agent.container.resources import ContainerResources, DeviceSpec, Mount
from agent.kuberuntime.runtime import ProcessRuntime
from harness.manifests import write_manifest
from kubenode.model.parse import parse_pod
from tests.agent.isolation_support import fake_device, probe_pod, run_probe, started_cgroups
from tests.agent.support import MOUNT, Harness, wait_until

FUSE = (10, 229)


@pytest.fixture
def fake_gpu(tmp_path: Path) -> str:
    return fake_device(tmp_path, FUSE)


@pytest.fixture
def cgroups(cgroup_root: str) -> Iterator[PodCgroups]:
    with started_cgroups(cgroup_root) as made:
        yield made


def test_the_holder_opens_its_device_at_its_container_path_and_sees_only_its_own_dev(
    tmp_path: Path, cgroups: PodCgroups, fake_gpu: str
) -> None:
    resources = ContainerResources(devices=[DeviceSpec("/dev/fakegpu0", fake_gpu, "rw")])
    _, report = run_probe(tmp_path, cgroups, probe_pod("holder", ["/dev/fakegpu0", "/dev/fuse", fake_gpu]),
                          resources)  # fmt: skip
    assert report["/dev/fakegpu0"] == "ok"
    # The same device under another name is opened too (the rule is by major:minor), but no host device
    # that was not given: /dev/fuse is not in its /dev.
    assert report["/dev/fuse"] == 2  # ENOENT
    assert set(report["dev"]) == {"null", "zero", "full", "random", "urandom", "tty", "fakegpu0", "pts",
                                  "shm", "mqueue", "fd", "stdin", "stdout", "stderr", "ptmx"} | (
        {"core"} if os.path.exists("/proc/kcore") else set())  # fmt: skip


def test_a_pod_that_asked_for_nothing_cannot_open_a_host_device_even_through_a_hostpath_of_dev(
    tmp_path: Path, cgroups: PodCgroups, fake_gpu: str
) -> None:
    pod = probe_pod("nothing", ["/host-dev/fuse", fake_gpu, "/dev/null"], host_dev=True)
    _, report = run_probe(tmp_path, cgroups, pod, ContainerResources())
    assert report["/host-dev/fuse"] == 1, report  # EPERM: the device cgroup refuses it
    assert report[fake_gpu] == 1
    assert report["/dev/null"] == "ok"


def test_a_privileged_pod_opens_every_device(tmp_path: Path, cgroups: PodCgroups, fake_gpu: str) -> None:
    pod = probe_pod("privileged", ["/dev/fuse", fake_gpu], privileged=True)
    _, report = run_probe(tmp_path, cgroups, pod, ContainerResources())
    assert report == {**report, "/dev/fuse": "ok", fake_gpu: "ok"}
    assert "fuse" in report["dev"]  # the host's /dev


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        (DeviceSpec("/dev/fakegpu0", "/nonexistent/gpu0", "rw"), "/nonexistent/gpu0"),
        (DeviceSpec("/dev/fakegpu0", "/etc/hostname", "rw"), "/etc/hostname"),
        (DeviceSpec("/dev/fakegpu0", "/dev/null", "rwx"), '"rwx"'),
    ],
)
def test_a_bad_device_spec_fails_the_container_naming_it_and_makes_nothing(
    tmp_path: Path, cgroups: PodCgroups, cgroup_root: str, spec: DeviceSpec, named: str
) -> None:
    pod = probe_pod("bad", [])
    record, _ = run_probe(tmp_path, cgroups, pod, ContainerResources(devices=[spec]))
    main = record.containers["main"]
    assert main.reason == "CreateContainerConfigError"
    assert named in main.message and "\n" not in main.message
    leftovers = [d for d in (MOUNT / "devices" / cgroup_root.strip("/")).rglob("main")]
    assert leftovers == []


HOG = "import time; x = b'a' * (120 << 20); time.sleep(60)"  # 120 MB touched against 48Mi


def test_each_container_has_its_own_limits_and_an_oom_kills_only_it(
    make_harness: Callable[..., Harness], manifests: Path, cgroup_root: str
) -> None:
    harness = make_harness().start()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "two"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "hog", "command": ["python3", "-c", HOG],
                 "resources": {"limits": {"memory": "48Mi", "cpu": "250m"}}},
                {"name": "sibling", "command": ["sleep", "60"],
                 "resources": {"limits": {"memory": "256Mi", "cpu": "500m"}}},
            ],
        },
    }  # fmt: skip
    write_manifest(manifests, "two.yaml", json.dumps(pod))

    def states() -> dict[str, Any] | None:
        item = harness.pod("two")
        statuses = {
            s["name"]: s["state"] for s in (item or {}).get("status", {}).get("containerStatuses", [])
        }
        return (
            statuses
            if "terminated" in statuses.get("hog", {}) and "running" in statuses.get("sibling", {})
            else None
        )

    found = wait_until(states, 30, "hog to be OOM-killed while its sibling runs")
    assert found["hog"]["terminated"]["reason"] == "OOMKilled"
    memory = MOUNT / "memory" / cgroup_root.strip("/") / "kubepods"
    pod_dir = next(memory.glob("pod*"))
    assert int((pod_dir / "memory.limit_in_bytes").read_text()) == 304 << 20
    assert int((pod_dir / "hog" / "memory.limit_in_bytes").read_text()) == 48 << 20
    assert int((pod_dir / "sibling" / "memory.limit_in_bytes").read_text()) == 256 << 20
    cpu = MOUNT / "cpu" / cgroup_root.strip("/") / "kubepods" / pod_dir.name
    assert (cpu / "hog" / "cpu.cfs_quota_us").read_text().strip() == "25000"


def test_trace_shows_a_containers_cgroup_device_rules_and_dev(
    tmp_path: Path, cgroups: PodCgroups, fake_gpu: str
) -> None:
    from cli.cgroupview import container_view

    state = tmp_path / "state"
    runtime = ProcessRuntime(state, RecordStore(state), HostInfo("n"), container_cgroups=cgroups)
    pod = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "uid": "uid-t"},
                     "spec": {"containers": [{"name": "main", "command": ["sleep", "30"]}]}})  # fmt: skip
    record = PodRecord(pod.uid, pod.namespace, pod.name)
    cgroups.ensure(pod)
    resources = ContainerResources(devices=[DeviceSpec("/dev/fakegpu0", fake_gpu, "rw")])
    try:
        runtime.sync_containers(pod, record, cgroups.procs_files(pod), {"main": resources}, fresh_cgroup=True)
        pid = record.containers["main"].pid
        assert pid is not None
        view = container_view(pid)
        assert str(view["cgroup"]).endswith("/poduid-t/main")
        assert "c 10:229 rw" in view["deviceRules"] and "c 1:3 rwm" in view["deviceRules"]
        assert "fakegpu0" in view["dev"] and "fuse" not in view["dev"]
    finally:
        cgroups.destroy(pod.uid)


def test_a_pods_cpuset_shrinks_and_grows_around_its_container_cgroups(
    cgroups: PodCgroups, cgroup_root: str
) -> None:
    """cgroup v1 refuses a pod cpuset that leaves out a CPU its container cgroup holds (EBUSY): the
    containers are narrowed first, and follow the pod's whole set after it grows."""
    every = (MOUNT / "cpuset" / "cpuset.cpus").read_text().strip()
    if every == "0":
        pytest.fail("this test needs a host with two CPUs or more")
    pod = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cs", "uid": "uid-cs"},
                     "spec": {"containers": [{"name": "main", "command": ["sleep", "30"]}]}})  # fmt: skip
    try:
        cgroups.ensure(pod, every)
        cgroups.ensure_container(pod, pod.containers[0], every, ())
        container = (
            MOUNT / "cpuset" / cgroup_root.strip("/") / "kubepods" / "besteffort" / "poduid-cs" / "main"
        )
        cgroups.ensure(pod, "0")
        assert (container / "cpuset.cpus").read_text().strip() == "0"
        cgroups.ensure(pod, every)
        assert (container / "cpuset.cpus").read_text().strip() == every
    finally:
        cgroups.destroy(pod.uid)


def test_allocates_mounts_are_bound_like_volume_mounts(tmp_path: Path, cgroups: PodCgroups) -> None:
    for name in ("ro", "rw"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "file").write_text("x")
    resources = ContainerResources(
        mounts=[
            Mount("/kn-alloc/ro", str(tmp_path / "ro"), True),
            Mount("/kn-alloc/rw", str(tmp_path / "rw")),
        ]
    )
    pod = probe_pod("mounts", ["/kn-alloc/ro/file", "/kn-alloc/rw/file"])
    _, report = run_probe(tmp_path, cgroups, pod, resources)
    assert (report["/kn-alloc/ro/file"], report["/kn-alloc/rw/file"]) == (30, "ok")  # EROFS where read-only
    assert not os.path.exists("/kn-alloc"), "made in the container's namespace only"
    record, _ = run_probe(
        tmp_path, cgroups, probe_pod("gone", []), ContainerResources(mounts=[Mount("/x", "/nonexistent")])
    )
    assert "/nonexistent" in record.containers["main"].message


def cdi_spec_dir(tmp_path: Path, host_node: str) -> Path:
    """A private CDI directory whose one device puts `host_node` at /dev/cdigpu0 (issue 37: process pods
    apply CDI's edits themselves)."""
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    device = {
        "name": "g0",
        "containerEdits": {"deviceNodes": [{"path": "/dev/cdigpu0", "hostPath": host_node}]},
    }
    spec = {"cdiVersion": "0.6.0", "kind": "kubenode.test/gpu", "devices": [device]}
    (spec_dir / "gpu.json").write_text(json.dumps(spec))
    return spec_dir


def test_a_cdi_device_is_a_node_in_the_containers_dev_and_a_device_rule(
    tmp_path: Path, cgroups: PodCgroups, fake_gpu: str
) -> None:
    cdi = CdiDevices([cdi_spec_dir(tmp_path, fake_gpu)])
    resources = ContainerResources(cdi_devices=["kubenode.test/gpu=g0"])
    _, report = run_probe(
        tmp_path, cgroups, probe_pod("cdi", ["/dev/cdigpu0", "/dev/fuse"]), resources, cdi.apply
    )
    assert report["/dev/cdigpu0"] == "ok", report
    assert report["/dev/fuse"] == 2  # ENOENT: only the CDI node was added to its /dev


def test_an_unknown_cdi_name_is_create_container_error_naming_it(
    tmp_path: Path, cgroups: PodCgroups, fake_gpu: str
) -> None:
    cdi = CdiDevices([cdi_spec_dir(tmp_path, fake_gpu)])
    resources = ContainerResources(cdi_devices=["kubenode.test/gpu=ghost"])
    record, _ = run_probe(tmp_path, cgroups, probe_pod("ghost", ["/dev/null"]), resources, cdi.apply)
    main = record.containers["main"]
    assert (main.state, main.reason) == ("waiting", "CreateContainerError")
    assert "kubenode.test/gpu=ghost" in main.message
