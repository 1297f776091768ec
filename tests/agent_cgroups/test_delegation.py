"""Under the systemd driver the agent's hierarchy goes inside its own (delegated) cgroup."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cm.cgroups.api import CgroupError
from agent.cm.cgroups.delegation import default_cgroup_root, leave_for_leaf, leave_if_inside, own_cgroup

V1_UNDER_SYSTEMD = """\
12:pids:/system.slice/kubenode-agent.service
5:cpu,cpuacct:/system.slice/kubenode-agent.service
4:memory:/system.slice/kubenode-agent.service
1:name=systemd:/system.slice/kubenode-agent.service
0::/system.slice/kubenode-agent.service
"""
V2_UNDER_SYSTEMD = "0::/system.slice/kubenode-agent.service\n"


def test_own_cgroup_v1_and_v2() -> None:
    assert own_cgroup(1, V1_UNDER_SYSTEMD) == "/system.slice/kubenode-agent.service"
    assert own_cgroup(2, V2_UNDER_SYSTEMD) == "/system.slice/kubenode-agent.service"
    assert own_cgroup(1, "1:name=systemd:/user.slice\n") == "/user.slice"
    assert own_cgroup(2, "") == "/"


def test_default_root_depends_on_the_driver() -> None:
    assert default_cgroup_root("cgroupfs", 1, V1_UNDER_SYSTEMD) == "/"
    assert default_cgroup_root("systemd", 1, V1_UNDER_SYSTEMD) == "/system.slice/kubenode-agent.service"
    # After moving itself into the supervisor leaf, a restarted agent still builds beside it.
    moved = "0::/system.slice/kubenode-agent.service/supervisor\n"
    assert default_cgroup_root("systemd", 2, moved) == "/system.slice/kubenode-agent.service"


def test_default_root_on_this_host_reads_proc_self_cgroup() -> None:
    root = default_cgroup_root("systemd", 1)
    assert root.startswith("/")


def test_leave_for_leaf_writes_the_pid_into_a_supervisor_leaf(tmp_path: Path) -> None:
    own = tmp_path / "system.slice" / "agent.service"
    own.mkdir(parents=True)
    leave_for_leaf(tmp_path, "/system.slice/agent.service", pid=4242)
    assert (own / "supervisor" / "cgroup.procs").read_text() == "4242"
    leave_for_leaf(tmp_path, "/", pid=1)  # not delegated: nothing to do
    with pytest.raises(CgroupError, match="supervisor"):
        leave_for_leaf(tmp_path, "/missing/unit.service", pid=1)


def test_leave_if_inside_only_when_the_root_is_at_or_below_its_own_cgroup(tmp_path: Path) -> None:
    own = tmp_path / "system.slice" / "agent.service"
    own.mkdir(parents=True)
    proc = "0::/system.slice/agent.service\n"
    assert not leave_if_inside(tmp_path, 1, "/system.slice/agent.service", proc)  # v1: no such rule
    assert not leave_if_inside(tmp_path, 2, "/", proc)  # kubepods beside it: nothing to do
    assert not leave_if_inside(tmp_path, 2, "/kubepods", "0::/\n")  # the mount root is exempt
    assert not (own / "supervisor").exists()
    # --cgroup-root at its own delegated cgroup (cgroupfs driver), or below it.
    assert leave_if_inside(tmp_path, 2, "/system.slice/agent.service", proc)
    assert (own / "supervisor" / "cgroup.procs").read_text().strip().isdigit()
    assert leave_if_inside(tmp_path, 2, "/system.slice/agent.service/pods", proc)
    # Restarted in the leaf: the root is beside it, not below it.
    assert not leave_if_inside(
        tmp_path, 2, "/system.slice/agent.service", proc.replace(".service", ".service/supervisor")
    )
