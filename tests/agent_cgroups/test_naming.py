"""Cgroup names for both drivers, and UIDs that never become paths unchecked."""

from __future__ import annotations

import pytest

from agent.cm.cgroups.api import CgroupError
from agent.cm.cgroups.naming import pod_cgroup_name, to_dirs, uid_from_dir
from kubenode.model import QOSClass

UID = "1234-abcd-5678"


def test_cgroupfs_names() -> None:
    assert to_dirs(pod_cgroup_name(QOSClass.BURSTABLE, UID), "cgroupfs") == (
        "kubepods",
        "burstable",
        f"pod{UID}",
    )
    assert to_dirs(pod_cgroup_name(QOSClass.GUARANTEED, UID), "cgroupfs") == ("kubepods", f"pod{UID}")


def test_systemd_names_round_trip() -> None:
    dirs = to_dirs(pod_cgroup_name(QOSClass.BURSTABLE, UID), "systemd")
    assert dirs == (
        "kubepods.slice",
        "kubepods-burstable.slice",
        "kubepods-burstable-pod1234_abcd_5678.slice",
    )
    assert uid_from_dir(dirs[-1], "systemd") == UID
    guaranteed = to_dirs(pod_cgroup_name(QOSClass.GUARANTEED, UID), "systemd")
    assert guaranteed[-1] == "kubepods-pod1234_abcd_5678.slice"
    assert uid_from_dir(guaranteed[-1], "systemd") == UID


@pytest.mark.parametrize(
    "dirname", ["burstable", "besteffort", "kubepods-burstable.slice", "pod", "pod..", "x.scope"]
)
def test_non_pod_directories_are_not_pods(dirname: str) -> None:
    assert uid_from_dir(dirname, "systemd") is None
    assert uid_from_dir(dirname, "cgroupfs") is None


@pytest.mark.parametrize("uid", ["", "../etc", "a/b", "a_b", ".hidden", "a b", "x" * 200, "-lead"])
def test_bad_uids_are_refused(uid: str) -> None:
    with pytest.raises(CgroupError, match="invalid pod UID"):
        pod_cgroup_name(QOSClass.BEST_EFFORT, uid)
