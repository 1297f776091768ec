"""The cgroup v1 devices controller, for real: a child placed in a fresh devices cgroup with the rules
applied opens what they allow and gets EPERM for the rest; devices.list is exactly the rule set."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cm.devicecgroup.choose import enforcement
from agent.cm.devicecgroup.rules import DEFAULT_ALLOWED_DEVICES, DeviceRule, container_rules, effective
from agent.cm.devicecgroup.v1 import DeviceCgroupError, apply_v1, parse_list, read_list, transition
from tests.devicecgroup.support import try_in_cgroup


def _lines(cgroup: Path) -> set[str]:
    return set((cgroup / "devices.list").read_text().split("\n")) - {""}


def test_only_the_given_device_opens(v1_cgroup: Path, nodes: dict[str, Path]) -> None:
    apply_v1(v1_cgroup, container_rules([(str(nodes["fuse"]), "rw")]))
    seen = try_in_cgroup(v1_cgroup / "cgroup.procs", [str(nodes["fuse"]), str(nodes["loop"]), "/dev/null"])
    assert seen == {str(nodes["fuse"]): "ok", str(nodes["loop"]): "EPERM", "/dev/null": "ok"}
    assert _lines(v1_cgroup) == {rule.line() for rule in DEFAULT_ALLOWED_DEVICES} | {"c 10:229 rw"}
    assert "a *:* rwm" not in _lines(v1_cgroup)


def test_no_device_given_none_opens_and_mknod_is_denied(v1_cgroup: Path, nodes: dict[str, Path]) -> None:
    apply_v1(v1_cgroup, container_rules([]))
    made = nodes["fuse"].parent / "made"
    seen = try_in_cgroup(v1_cgroup / "cgroup.procs", [str(nodes["fuse"]), f"mknod:{made}"])
    assert seen == {str(nodes["fuse"]): "EPERM", f"mknod:{made}": "EPERM"}


def test_an_update_changes_only_the_difference(v1_cgroup: Path, nodes: dict[str, Path]) -> None:
    apply_v1(v1_cgroup, container_rules([(str(nodes["fuse"]), "rw")]))
    before = read_list(v1_cgroup)
    target = effective(container_rules([(str(nodes["loop"]), "r")]))
    # No deny-all step: a running process keeps its default devices throughout.
    assert [rule.line() for rule in transition(before, target)] == ["c 10:229 rw", "c 10:237 r"]
    assert [rule.allow for rule in transition(before, target)] == [False, True]
    apply_v1(v1_cgroup, container_rules([(str(nodes["loop"]), "r")]))
    assert read_list(v1_cgroup) == target
    seen = try_in_cgroup(v1_cgroup / "cgroup.procs", [str(nodes["fuse"]), str(nodes["loop"])])
    assert seen == {str(nodes["fuse"]): "EPERM", str(nodes["loop"]): "EPERM"}  # opened O_RDWR, granted r only


def test_a_fresh_cgroup_gets_deny_all_then_each_allow(v1_cgroup: Path) -> None:
    assert _lines(v1_cgroup) == {"a *:* rwm"}
    writes = transition(read_list(v1_cgroup), effective(DEFAULT_ALLOWED_DEVICES))
    assert writes[0].line() == "a *:* rwm" and not writes[0].allow
    assert all(rule.allow for rule in writes[1:])


def test_privileged_allows_everything(v1_cgroup: Path, nodes: dict[str, Path]) -> None:
    apply_v1(v1_cgroup, container_rules([]))
    apply_v1(v1_cgroup, container_rules([], privileged=True))
    assert _lines(v1_cgroup) == {"a *:* rwm"}
    seen = try_in_cgroup(v1_cgroup / "cgroup.procs", [str(nodes["fuse"]), str(nodes["loop"])])
    assert seen == {str(nodes["fuse"]): "ok", str(nodes["loop"]): "ok"}


def test_a_child_cannot_be_granted_more_than_its_parent(v1_cgroup: Path) -> None:
    apply_v1(v1_cgroup, DEFAULT_ALLOWED_DEVICES)
    child = v1_cgroup / "child"
    child.mkdir()
    with pytest.raises(DeviceCgroupError) as raised:
        apply_v1(child, [DeviceRule("c", 10, 229, "rw")])
    assert str(raised.value).startswith(f"{child}/devices.allow: writing 'c 10:229 rw': ")


def test_a_missing_cgroup_is_named(tmp_path: Path) -> None:
    with pytest.raises(DeviceCgroupError, match=f"{tmp_path}/gone/devices.list: No such file"):
        apply_v1(tmp_path / "gone", DEFAULT_ALLOWED_DEVICES)


def test_devices_list_parsing() -> None:
    assert parse_list("a *:* rwm\n").default_allow
    parsed = parse_list("c 1:3 rwm\nc 136:* rwm\nb 8:0 r\n")
    assert [rule.line() for rule in parsed.exceptions] == ["c 1:3 rwm", "b 8:0 r", "c 136:* rwm"]


def test_this_hybrid_host_gets_the_v1_controller(tmp_path: Path) -> None:
    assert enforcement() == "v1"
    with pytest.raises(DeviceCgroupError, match=f"{tmp_path}: cgroup v1 without the devices controller"):
        enforcement(tmp_path)
