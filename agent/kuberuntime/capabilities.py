"""Linux capabilities for a container process: the set its securityContext gives it, and dropping the rest.

`container_capabilities` computes the set as containerd's CRI plugin does for a container: a privileged
container gets every capability; any other starts from the runtime's default set (`RUNTIME_DEFAULT`,
containerd's list), then `add: [ALL]` widens it to every capability, `drop: [ALL]` empties it, named drops
are taken out and named adds put in (an add wins over a drop of the same name). Names are accepted with or
without `CAP_`, in any case; an unknown name is a `ContainerConfigError` naming it.

`restrict_to` runs in the child between fork and exec, still as root: it drops every other capability from
the bounding set, and clears the inheritable and ambient sets, so that after exec a root process holds
exactly the set (execve gives root its bounding set) and a process that changed to another user holds
none, as in a container. It uses prctl(2) and capset(2) through libc; nothing else in the standard library
reaches them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable

from agent.container.downwardapi import ContainerConfigError
from agent.util.libc import LIBC, check

# The kernel's capability numbers (include/uapi/linux/capability.h), by name without the CAP_ prefix.
CAPABILITY_NUMBERS: dict[str, int] = {
    name: number
    for number, name in enumerate(
        [
            "CHOWN",
            "DAC_OVERRIDE",
            "DAC_READ_SEARCH",
            "FOWNER",
            "FSETID",
            "KILL",
            "SETGID",
            "SETUID",
            "SETPCAP",
            "LINUX_IMMUTABLE",
            "NET_BIND_SERVICE",
            "NET_BROADCAST",
            "NET_ADMIN",
            "NET_RAW",
            "IPC_LOCK",
            "IPC_OWNER",
            "SYS_MODULE",
            "SYS_RAWIO",
            "SYS_CHROOT",
            "SYS_PTRACE",
            "SYS_PACCT",
            "SYS_ADMIN",
            "SYS_BOOT",
            "SYS_NICE",
            "SYS_RESOURCE",
            "SYS_TIME",
            "SYS_TTY_CONFIG",
            "MKNOD",
            "LEASE",
            "AUDIT_WRITE",
            "AUDIT_CONTROL",
            "SETFCAP",
            "MAC_OVERRIDE",
            "MAC_ADMIN",
            "SYSLOG",
            "WAKE_ALARM",
            "BLOCK_SUSPEND",
            "AUDIT_READ",
            "PERFMON",
            "BPF",
            "CHECKPOINT_RESTORE",
        ]
    )
}

# containerd's default capabilities for a non-privileged container (the CRI plugin's default spec).
RUNTIME_DEFAULT = frozenset(
    [
        "CHOWN",
        "DAC_OVERRIDE",
        "FSETID",
        "FOWNER",
        "MKNOD",
        "NET_RAW",
        "SETGID",
        "SETUID",
        "SETFCAP",
        "SETPCAP",
        "NET_BIND_SERVICE",
        "SYS_CHROOT",
        "KILL",
        "AUDIT_WRITE",
    ]
)

_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def last_capability() -> int:
    """The highest capability number this kernel knows."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return max(CAPABILITY_NUMBERS.values())


def all_capabilities() -> frozenset[str]:
    top = last_capability()
    return frozenset(name for name, number in CAPABILITY_NUMBERS.items() if number <= top)


def _normalize(names: Iterable[str], verb: str) -> list[str]:
    result = []
    for raw in names:
        name = raw.upper().removeprefix("CAP_")
        if name != "ALL" and name not in CAPABILITY_NUMBERS:
            raise ContainerConfigError(f"unknown capability to {verb}: {raw!r}")
        result.append(name)
    return result


def container_capabilities(privileged: bool, add: Iterable[str], drop: Iterable[str]) -> frozenset[str]:
    """The container's capability names (without CAP_), as containerd computes them."""
    everything = all_capabilities()
    if privileged:
        return everything
    adds, drops = _normalize(add, "add"), _normalize(drop, "drop")
    base = everything if "ALL" in adds else RUNTIME_DEFAULT
    kept = set() if "ALL" in drops else {name for name in base if name not in drops}
    kept.update(name for name in adds if name != "ALL")
    return frozenset(kept & everything)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def restrict_to(names: frozenset[str]) -> None:
    """In the child, as root: only `names` stay in the bounding set; inheritable and ambient go empty."""
    keep = {CAPABILITY_NUMBERS[name] for name in names}
    for number in range(last_capability() + 1):
        if number not in keep:
            check(LIBC.prctl(_PR_CAPBSET_DROP, number, 0, 0, 0), f"dropping capability {number}")
    check(LIBC.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    check(LIBC.capget(ctypes.byref(header), data), "capget")
    for half in data:
        half.inheritable = 0
    check(LIBC.capset(ctypes.byref(header), data), "capset")
