"""Process pods' container isolation on a pure cgroup v2 kernel (issue 37): each container's cgroup gets one
BPF device program, which is the only device control there is here.

The static device is a node made with mknod from /dev/kmsg's numbers (1:11: built into every kernel, in no
runtime's default list), offered at another containerPath. The holder opens it there; a pod that asked for
nothing gets EPERM even through a hostPath of /dev; a privileged pod opens it; after the container's
cgroup is made again for the same container (an update, or a restarted agent's), one program is attached.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cm.cgroups.api import PodCgroups
from agent.cm.devicecgroup.bpf import attached_programs
from agent.cm.devicecgroup.rules import container_rules
from agent.container.resources import ContainerResources, DeviceSpec
from tests.agent.isolation_support import fake_device, probe_pod, run_probe, started_cgroups
from tests.cgroup2_guest.conftest import Transcript
from tests.cgroup2_guest.support import cgroup_dir

KMSG = (1, 11)


@pytest.fixture
def fake_gpu(tmp_path: Path) -> str:
    return fake_device(tmp_path, KMSG)


@pytest.fixture
def cgroups(v2_root: str) -> Iterator[PodCgroups]:
    with started_cgroups(v2_root) as made:
        yield made


def test_devices_of_process_containers_on_cgroup_v2(
    tmp_path: Path, cgroups: PodCgroups, fake_gpu: str, v2_root: str, transcript: Transcript
) -> None:
    holder = ContainerResources(devices=[DeviceSpec("/dev/fakegpu0", fake_gpu, "rw")])
    _, report = run_probe(
        tmp_path / "a", cgroups, probe_pod("holder", ["/dev/fakegpu0", "/dev/kmsg"]), holder
    )
    assert report["/dev/fakegpu0"] == "ok" and report["/dev/kmsg"] == 2  # ENOENT: not in its /dev
    pod = probe_pod("nothing", ["/host-dev/kmsg", fake_gpu, "/dev/null"], host_dev=True)
    _, report = run_probe(tmp_path / "b", cgroups, pod, ContainerResources())
    assert (report["/host-dev/kmsg"], report[fake_gpu], report["/dev/null"]) == (1, 1, "ok")  # EPERM
    pod = probe_pod("privileged", ["/dev/kmsg", fake_gpu], privileged=True)
    _, report = run_probe(tmp_path / "c", cgroups, pod, ContainerResources())
    assert (report["/dev/kmsg"], report[fake_gpu]) == ("ok", "ok")

    # Made again for the same container (an update, or a restarted agent): still one program.
    pod = probe_pod("again", [])
    cgroups.ensure(pod)
    container = pod.containers[0]
    rules = container_rules([(fake_gpu, "rw")])
    try:
        for _ in range(3):
            cgroups.ensure_container(pod, container, None, rules)
        found = list(cgroup_dir(v2_root).rglob("main"))
        assert len(found) == 1
        assert len(attached_programs(found[0])) == 1
    finally:
        cgroups.destroy(pod.uid)
    transcript.line(
        "container isolation: holder opens its device, hostPath /dev EPERM, one program per cgroup"
    )
