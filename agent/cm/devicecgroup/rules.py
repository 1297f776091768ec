"""Device cgroup rules: what a container may open (r, w) or create (m), by type and major:minor.

Flow (wiring, after issue 37's agent restructuring): for each container the runtime builds its rule list
with `container_rules(devices, privileged)`: the default allow list, then one rule per device spec that
the device manager's RunOptions carries (`rule_for_device(host_path, permissions)`, which stats the host
node in the agent, before anything is forked, so a bad spec fails the container with one line naming
it). The list goes to `v1.apply_v1` (cgroup v1 and hybrid hosts) or `bpf.replace_device_program`
(cgroup v2); both start from "deny everything" and read the list through `effective()`, the same
normalisation runc uses for both (its devices emulator): later rules override earlier ones per
type:major:minor, an `a` rule resets the mode, and a deny that would punch a hole in a wildcard allow is
refused (cgroup v1 would silently ignore it).

Defaults: `RUNC_ALLOWED_DEVICES` is runc's `specconv.AllowedDevices`, verbatim. `DEFAULT_ALLOWED_DEVICES`
is that list without its first two rules (`c *:* m`, `b *:* m`: mknod of any device): a pod may then
not create a node for a device it was not given (devices.md, "What a Python node agent must do", 4).
Opening such a node would be refused anyway; without `m` it cannot even be made. The device nodes a
container's /dev needs are made by the runtime before exec (agent/kuberuntime/devfs.py), which falls
back to a bind mount where mknod is refused, as runc does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

WILDCARD = -1
MAX_DEVICE_NUMBER = (1 << 32) - 1
ACCESS_ORDER = "rwm"
DeviceType = Literal["a", "b", "c"]


class DeviceRuleError(ValueError):
    """A device rule or device spec that cannot be honoured; the message is one line naming it."""


def canonical_access(access: str, what: str) -> str:
    """`access` as "rwm" ordered, checked: only r, w and m, at least one; errors name `what`."""
    if not access or any(ch not in ACCESS_ORDER for ch in access):
        raise DeviceRuleError(f'{what}: permissions "{access}" must be a nonempty combination of r, w and m')
    return "".join(ch for ch in ACCESS_ORDER if ch in access)


def _number_text(number: int) -> str:
    return "*" if number == WILDCARD else str(number)


@dataclass(frozen=True)
class DeviceRule:
    """One rule: `type` c (char), b (block) or a (all); major and minor may be WILDCARD (-1)."""

    type: DeviceType
    major: int
    minor: int
    access: str
    allow: bool = True

    def __post_init__(self) -> None:
        if self.type not in ("a", "b", "c"):
            raise DeviceRuleError(f'device rule: type "{self.type}" must be a, b or c')
        for name, number in (("major", self.major), ("minor", self.minor)):
            if not WILDCARD <= number <= MAX_DEVICE_NUMBER:
                raise DeviceRuleError(f"device rule: {name} {number} is out of range")
        object.__setattr__(self, "access", canonical_access(self.access, "device rule"))

    @property
    def key(self) -> tuple[DeviceType, int, int]:
        return (self.type, self.major, self.minor)

    def line(self) -> str:
        """The cgroup v1 form, as devices.allow / devices.deny take it and devices.list shows it."""
        return f"{self.type} {_number_text(self.major)}:{_number_text(self.minor)} {self.access}"


def _char(major: int, minor: int, access: str = "rwm") -> DeviceRule:
    return DeviceRule("c", major, minor, access)


# runc libcontainer/specconv AllowedDevices, in its order (devices.md section 1).
RUNC_ALLOWED_DEVICES: tuple[DeviceRule, ...] = (
    _char(WILDCARD, WILDCARD, "m"),
    DeviceRule("b", WILDCARD, WILDCARD, "m"),
    _char(1, 3),  # /dev/null
    _char(1, 8),  # /dev/random
    _char(1, 7),  # /dev/full
    _char(5, 0),  # /dev/tty
    _char(1, 5),  # /dev/zero
    _char(1, 9),  # /dev/urandom
    _char(136, WILDCARD),  # /dev/pts/*
    _char(5, 2),  # /dev/ptmx
    _char(10, 200),  # /dev/net/tun (kept by runc for compatibility)
)
DEFAULT_ALLOWED_DEVICES: tuple[DeviceRule, ...] = RUNC_ALLOWED_DEVICES[2:]
DENY_ALL = DeviceRule("a", WILDCARD, WILDCARD, "rwm", allow=False)
ALLOW_ALL = DeviceRule("a", WILDCARD, WILDCARD, "rwm", allow=True)


@dataclass(frozen=True)
class HostDevice:
    """A device node on the host, as stat(2) shows it (symlinks followed, as containerd does)."""

    path: str
    type: Literal["b", "c"]
    major: int
    minor: int
    mode: int  # permission bits only
    uid: int
    gid: int


def host_device(path: str) -> HostDevice:
    """Stat `path`: it must exist and be a character or block device; errors name the path."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise DeviceRuleError(f"device {path}: {exc.strerror}") from None
    if stat.S_ISCHR(st.st_mode):
        kind: Literal["b", "c"] = "c"
    elif stat.S_ISBLK(st.st_mode):
        kind = "b"
    else:
        raise DeviceRuleError(f"device {path}: not a character or block device")
    return HostDevice(
        path, kind, os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid
    )


def rule_for_device(host_path: str, permissions: str) -> DeviceRule:
    """The allow rule for a device spec: the host node's type and major:minor with exactly `permissions`."""
    access = canonical_access(permissions, f"device {host_path}")
    node = host_device(host_path)
    return DeviceRule(node.type, node.major, node.minor, access)


def container_rules(devices: Iterable[tuple[str, str]], privileged: bool = False) -> tuple[DeviceRule, ...]:
    """A container's rules: everything when privileged (as runc: `a *:* rwm`); else the default allow
    list and one rule per (host_path, permissions) device spec."""
    if privileged:
        return (ALLOW_ALL,)
    return DEFAULT_ALLOWED_DEVICES + tuple(rule_for_device(path, perms) for path, perms in devices)


# ----- the effective rule set (runc's devices emulator) ----------------------------------------------


@dataclass(frozen=True)
class EffectiveRules:
    """What a rule list amounts to: a default and the exceptions to it, ordered as runc orders them
    (major, minor, type: wildcards first), one per type:major:minor."""

    default_allow: bool
    exceptions: tuple[DeviceRule, ...]


def _union(a: str, b: str) -> str:
    return "".join(ch for ch in ACCESS_ORDER if ch in a or ch in b)


def _difference(a: str, b: str) -> str:
    return "".join(ch for ch in a if ch not in b)


def effective(rules: Iterable[DeviceRule]) -> EffectiveRules:
    """Apply `rules` in order to a cgroup that starts denying everything (as our cgroups do: the
    runtimes write `a` to devices.deny first) and return what holds afterwards."""
    default_allow = False
    table: dict[tuple[DeviceType, int, int], str] = {}
    for rule in rules:
        if rule.type == "a":
            default_allow, table = rule.allow, {}
            continue
        if rule.allow != default_allow:  # an exception to the default: add its access
            table[rule.key] = _union(table.get(rule.key, ""), rule.access)
            continue
        # Same as the default: take access away from the exception, never from a wildcard one (cgroup v1
        # would ignore it silently; runc refuses).
        for partial in ((rule.type, WILDCARD, rule.minor), (rule.type, rule.major, WILDCARD),
                        (rule.type, WILDCARD, WILDCARD)):  # fmt: skip
            held = table.get(partial, "")
            if partial != rule.key and set(held) & set(rule.access):
                wildcard = DeviceRule(partial[0], partial[1], partial[2], held).line()
                raise DeviceRuleError(
                    f"device rule {rule.line()} would punch a hole in the wildcard rule {wildcard}, "
                    "which device cgroups cannot do"
                )
        left = _difference(table.get(rule.key, ""), rule.access)
        if left:
            table[rule.key] = left
        else:
            table.pop(rule.key, None)
    ordered = sorted(table.items(), key=lambda item: (item[0][1], item[0][2], item[0][0]))
    exceptions = tuple(DeviceRule(t, ma, mi, access, not default_allow) for (t, ma, mi), access in ordered)
    return EffectiveRules(default_allow, exceptions)
