"""cgroup v1: a rule list applied to a cgroup of the `devices` hierarchy, then read back and checked.

Flow (wiring): on a cgroup v1 host (and on a hybrid one: see `choose.py`) the runtime makes the
container's cgroup in the devices hierarchy (`/sys/fs/cgroup/devices/<pod cgroup>/<container>`: the
agent makes no devices cgroups today, and a v1 child can never be granted more than its parent, so
the pod level stays allow-all and each container is restricted), calls `apply_v1(dir, rules)` with
`rules.container_rules(...)` BEFORE the container's process joins it, then puts the process in it
with its other cgroups. On an update it calls `apply_v1` again.

What is written, as runc's setV1 does (opencontainers/cgroups devices/v1.go): the smallest change
from what devices.list shows now to the target. A fresh cgroup (it inherits the parent's `a *:* rwm`,
which means "allow everything") gets `a` written to devices.deny, then one devices.allow line per
allowed rule, in runc's order. A cgroup that is already an allow list (an update, an agent restart,
an adopted pod) gets only the differences, so a running process never sees a moment in which all its
devices are denied. Each line is its own write(2) (the kernel parses one rule per write), all through
one open descriptor per file. Then devices.list is read back and must equal the target exactly
(allow-list mode) or be `a *:* rwm` (allow-all mode), else the call fails naming the cgroup and the
difference.

`fresh=True` is for a cgroup the caller has just made (a new container's, with no task in it yet): what it
inherited is not read, since `a` written to devices.deny resets any inherited list to "deny everything",
and it is not read back either: from there each allow line either takes effect or fails its own write(2)
(the kernel refuses, EPERM, a rule its parent does not grant), so the writes' results are the check. That
is 11 writes and no reads for a container with the default list, which is what a new pod pays.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from agent.cm.devicecgroup.rules import (
    ALLOW_ALL,
    DENY_ALL,
    WILDCARD,
    DeviceRule,
    DeviceRuleError,
    EffectiveRules,
    effective,
)

V1_DEVICES_MOUNT = Path("/sys/fs/cgroup/devices")


class DeviceCgroupError(OSError):
    """Writing or verifying a devices cgroup failed; the message names the cgroup and the rule."""

    def __str__(self) -> str:
        return str(self.strerror)  # one line, without OSError's "[Errno N]"


def _parse_number(text: str, line: str) -> int:
    if text == "*":
        return WILDCARD
    if not text.isdigit():
        raise DeviceRuleError(f"devices.list line {line!r}: bad device number {text!r}")
    return int(text)


def parse_list(text: str) -> EffectiveRules:
    """devices.list as the rules in force: `a *:* rwm` means allow-all (its deny exceptions are not
    shown by the kernel); any other lines are the allow list of a cgroup that denies by default."""
    allowed = []
    for line in text.splitlines():
        fields = line.replace(":", " ").split()
        if not fields:
            continue
        if len(fields) != 4:
            raise DeviceRuleError(f"devices.list line {line!r}: expected 'TYPE MAJOR:MINOR ACCESS'")
        kind, major, minor, access = fields
        if kind == "a":
            return EffectiveRules(True, ())
        if kind not in ("b", "c"):
            raise DeviceRuleError(f"devices.list line {line!r}: unknown type {kind!r}")
        number = (_parse_number(major, line), _parse_number(minor, line))
        allowed.append(DeviceRule(kind, number[0], number[1], access))  # type: ignore[arg-type]
    return effective(allowed)


def read_list(cgroup_dir: Path) -> EffectiveRules:
    return parse_list((cgroup_dir / "devices.list").read_text())


def transition(current: EffectiveRules, target: EffectiveRules) -> list[DeviceRule]:
    """The writes that take a cgroup from `current` to `target` (runc's emulator Transition)."""
    if current.default_allow or current.default_allow != target.default_allow:
        # devices.list cannot show an allow-all cgroup's deny exceptions: start again from the default.
        return [ALLOW_ALL if target.default_allow else DENY_ALL, *target.exceptions]
    old = {rule.key: rule.access for rule in current.exceptions}
    new = {rule.key: rule.access for rule in target.exceptions}
    allow = not target.default_allow
    writes = []
    for rule in current.exceptions:
        gone = "".join(ch for ch in rule.access if ch not in new.get(rule.key, ""))
        if gone:
            writes.append(DeviceRule(rule.type, rule.major, rule.minor, gone, allow=not allow))
    for rule in target.exceptions:
        added = "".join(ch for ch in rule.access if ch not in old.get(rule.key, ""))
        if added:
            writes.append(DeviceRule(rule.type, rule.major, rule.minor, added, allow=allow))
    return writes


def _write_all(cgroup_dir: Path, writes: Iterable[DeviceRule]) -> None:
    """Each rule in order, one write(2) each, through one descriptor per file (kept open across a run of
    rules to the same file: the kernel parses every write on its own)."""
    opened: tuple[str, int] | None = None
    try:
        for rule in writes:
            name = "devices.allow" if rule.allow else "devices.deny"
            line = rule.line()
            try:
                if opened is None or opened[0] != name:
                    if opened is not None:
                        os.close(opened[1])
                        opened = None
                    opened = name, os.open(cgroup_dir / name, os.O_WRONLY | os.O_CLOEXEC)
                os.write(opened[1], line.encode())
            except OSError as exc:
                raise DeviceCgroupError(
                    exc.errno, f"{cgroup_dir}/{name}: writing {line!r}: {exc.strerror}"
                ) from None
    finally:
        if opened is not None:
            os.close(opened[1])


def apply_v1(cgroup_dir: Path, rules: Iterable[DeviceRule], *, fresh: bool = False) -> None:
    """Make `cgroup_dir` (a devices cgroup) enforce `rules`; `fresh`: the caller has just made it (see the
    module's docstring for both)."""
    target = effective(rules)  # a bad rule list fails here, before anything is written
    if fresh:
        _write_all(cgroup_dir, [ALLOW_ALL] if target.default_allow else [DENY_ALL, *target.exceptions])
        return
    try:
        current = read_list(cgroup_dir)
    except OSError as exc:
        raise DeviceCgroupError(exc.errno, f"{cgroup_dir}/devices.list: {exc.strerror}") from None
    _write_all(cgroup_dir, transition(current, target))
    shown = read_list(cgroup_dir)
    if shown != target and not (target.default_allow and shown.default_allow):
        want = ", ".join(r.line() for r in target.exceptions) or "nothing"
        have = ", ".join(r.line() for r in shown.exceptions) or (
            "a *:* rwm" if shown.default_allow else "nothing"
        )
        raise DeviceCgroupError(0, f"{cgroup_dir}/devices.list shows {have}; expected {want}")
