"""Device rules: validation in one clear line, runc's defaults, rules from device specs, the effective set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.cm.devicecgroup.rules import (
    ALLOW_ALL,
    DEFAULT_ALLOWED_DEVICES,
    RUNC_ALLOWED_DEVICES,
    DeviceRule,
    DeviceRuleError,
    container_rules,
    effective,
    rule_for_device,
)


def test_runc_default_list_as_cgroup_lines() -> None:
    assert [rule.line() for rule in RUNC_ALLOWED_DEVICES] == [
        "c *:* m", "b *:* m", "c 1:3 rwm", "c 1:8 rwm", "c 1:7 rwm", "c 5:0 rwm", "c 1:5 rwm", "c 1:9 rwm",
        "c 136:* rwm", "c 5:2 rwm", "c 10:200 rwm",
    ]  # fmt: skip
    assert all(rule.allow for rule in RUNC_ALLOWED_DEVICES)


def test_our_default_is_runcs_without_mknod_of_everything() -> None:
    assert RUNC_ALLOWED_DEVICES[2:] == DEFAULT_ALLOWED_DEVICES
    assert not any(rule.major == -1 and "m" in rule.access for rule in DEFAULT_ALLOWED_DEVICES)


def test_access_is_kept_in_rwm_order() -> None:
    assert DeviceRule("c", 1, 3, "mwr").access == "rwm"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type": "x", "major": 1, "minor": 3, "access": "r"}, 'type "x" must be a, b or c'),
        ({"type": "c", "major": -2, "minor": 3, "access": "r"}, "major -2 is out of range"),
        ({"type": "c", "major": 1, "minor": 1 << 32, "access": "r"}, f"minor {1 << 32} is out of range"),
        (
            {"type": "c", "major": 1, "minor": 3, "access": ""},
            'permissions "" must be a nonempty combination',
        ),
        ({"type": "c", "major": 1, "minor": 3, "access": "rx"}, 'permissions "rx" must be a nonempty'),
    ],
)
def test_a_bad_rule_is_one_line_naming_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(DeviceRuleError, match=message) as raised:
        DeviceRule(**kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


def test_rule_for_a_device_spec_takes_the_host_nodes_numbers() -> None:
    rdev = os.stat("/dev/null").st_rdev
    assert rule_for_device("/dev/null", "wr") == DeviceRule("c", os.major(rdev), os.minor(rdev), "rw")


def test_rule_for_a_device_spec_follows_symlinks(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/dev/zero")
    assert rule_for_device(str(tmp_path / "link"), "r").line() == "c 1:5 r"


@pytest.mark.parametrize(
    ("path", "permissions", "message"),
    [
        ("/dev/no-such-device", "rw", "device /dev/no-such-device: No such file or directory"),
        ("/etc/hostname", "rw", "device /etc/hostname: not a character or block device"),
        ("/dev", "rw", "device /dev: not a character or block device"),
        (
            "/dev/null",
            "rwx",
            'device /dev/null: permissions "rwx" must be a nonempty combination of r, w and m',
        ),
        ("/dev/null", "", 'device /dev/null: permissions "" must be a nonempty combination of r, w and m'),
    ],
)
def test_a_bad_device_spec_is_one_line_naming_it(path: str, permissions: str, message: str) -> None:
    with pytest.raises(DeviceRuleError) as raised:
        rule_for_device(path, permissions)
    assert str(raised.value) == message


def test_container_rules() -> None:
    assert container_rules([], privileged=True) == (ALLOW_ALL,)
    rules = container_rules([("/dev/zero", "r")])
    assert rules[:-1] == DEFAULT_ALLOWED_DEVICES and rules[-1].line() == "c 1:5 r"


def test_effective_orders_as_runc_and_merges_per_device() -> None:
    rules = [DeviceRule("c", 10, 200, "r"), DeviceRule("b", 8, 0, "r"), DeviceRule("c", 10, 200, "w"),
             DeviceRule("c", 1, -1, "m")]  # fmt: skip
    result = effective(rules)
    assert not result.default_allow
    assert [rule.line() for rule in result.exceptions] == ["c 1:* m", "b 8:0 r", "c 10:200 rw"]


def test_effective_deny_takes_access_away_and_a_rule_resets() -> None:
    rules = [DeviceRule("c", 1, 3, "rwm"), DeviceRule("c", 1, 3, "w", allow=False)]
    assert [rule.line() for rule in effective(rules).exceptions] == ["c 1:3 rm"]
    assert effective([*rules, ALLOW_ALL]).exceptions == ()
    assert effective([*rules, ALLOW_ALL]).default_allow
