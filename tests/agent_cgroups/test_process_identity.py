"""Which container a process is (agent/kuberuntime/identity.py): its container cgroup first, its stamp second;
real processes in real container cgroups, and the /proc/<pid>/cgroup forms of both drivers."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cm.cgroups.manager import PodCgroupManager
from agent.kuberuntime.identity import IDENTITY_ENV, Identity, container_in, read_identity, stamped_processes
from tests.agent.support import wait_until
from tests.agent_cgroups.support import container, pod


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("4:memory:/kn/kubepods/besteffort/pod1-2/main\n", ("1-2", "main")),
        ("0::/kn/kubepods/pod1-2/side-car\n", ("1-2", "side-car")),
        (
            "1:name=systemd:/user.slice\n"
            "4:cpu:/kn.slice/kubepods.slice/kubepods-burstable.slice/"
            "kubepods-burstable-pod1_2.slice/kubenode-main.scope\n",
            ("1-2", "main"),
        ),
        ("4:memory:/kn/kubepods/besteffort/pod1-2\n", None),  # the pod cgroup itself
        ("4:memory:/kn/kubepods/besteffort\n", None),
        ("4:cpu:/kn.slice/kubepods.slice/kubepods-pod1_2.slice/other.scope\n", None),
        ("", None),
    ],
)
def test_a_container_cgroup_path_names_its_pod_and_container(
    text: str, found: tuple[str, str] | None
) -> None:
    assert container_in(text) == found


def test_the_stamp_is_found_wherever_a_shell_put_it_in_the_environment() -> None:
    env = {"A": "1", "B": "x" * 70000, IDENTITY_ENV: "uid-1/main/abc", "Z": "2"}
    # dash rebuilds the environment of what it execs in its own order: the stamp is not first any more.
    child = subprocess.Popen(["sh", "-c", "exec sleep 30"], env=env, start_new_session=True)
    try:
        wait_until(
            lambda: Path(f"/proc/{child.pid}/cmdline").read_bytes().startswith(b"sleep"), 5, "the exec"
        )
        assert read_identity(child.pid) == Identity("uid-1", "main", "abc")
    finally:
        child.kill()
        child.wait()


@pytest.fixture
def in_container_cgroup(manager: PodCgroupManager) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """An unstamped session leader in a container's cgroup (a child that joined it and has not exec'd)."""
    main = container("main")
    p = pod(main)
    manager.ensure(p)
    files = manager.ensure_container(p, main, None, ())

    def join() -> None:
        for path in files:
            fd = os.open(path, os.O_WRONLY)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)

    child = subprocess.Popen(["sleep", "30"], env={"A": "1"}, start_new_session=True, preexec_fn=join)
    try:
        yield p.uid, child
    finally:
        manager.destroy(p.uid)
        child.wait()


def test_a_process_in_a_container_cgroup_is_that_container_without_a_stamp(
    manager: PodCgroupManager, in_container_cgroup: tuple[str, subprocess.Popen[bytes]]
) -> None:
    uid, child = in_container_cgroup
    found = stamped_processes(manager.pids(uid))
    assert [(p.pid, p.identity) for p in found] == [(child.pid, Identity(uid, "main", ""))]
