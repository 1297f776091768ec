"""Seccomp for container processes: a pod's seccompProfile turned into a filter the child loads before exec.

`resolve_profile` maps the effective `seccompProfile` to an OCI seccomp profile (the format runc and
containerd read): `RuntimeDefault` is the runtime's default (seccompdefault.py), `Localhost` reads
`<seccomp root>/<localhostProfile>` (the kubelet's `<root-dir>/seccomp`; here `<stateDir>/seccomp`), and
`Unconfined` (or none, the kubelet's default) is no filter. `build_filter` compiles a profile into a
libseccomp filter through pyseccomp (ctypes over the system's libseccomp) in the agent, once per start;
the child only calls `load`. A profile that cannot be read or compiled is a `ContainerConfigError` naming
it, so the container waits with CreateContainerConfigError rather than running unconfined.
"""

from __future__ import annotations

import errno
import functools
import json
from pathlib import Path
from typing import Any

from agent.container.downwardapi import ContainerConfigError
from agent.kuberuntime.seccompdefault import runtime_default_profile

MAX_PROFILE_BYTES = 1 << 20

_ACTIONS = {"SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
            "SCMP_ACT_KILL_THREAD", "SCMP_ACT_TRAP", "SCMP_ACT_LOG"}  # fmt: skip
_OPS = ("SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE", "SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT",
        "SCMP_CMP_MASKED_EQ")  # fmt: skip


def resolve_profile(
    profile: dict[str, Any] | None, capabilities: frozenset[str], seccomp_root: Path
) -> dict[str, Any] | None:
    """The OCI profile for an effective seccompProfile (None: unconfined)."""
    kind = (profile or {}).get("type", "Unconfined")
    if kind == "Unconfined":
        return None
    if kind == "RuntimeDefault":
        return runtime_default_profile(capabilities)
    if kind == "Localhost":
        name = str((profile or {}).get("localhostProfile") or "")
        if not name or name.startswith("/") or ".." in Path(name).parts:
            raise ContainerConfigError(f"seccompProfile.localhostProfile {name!r} must be a relative path")
        path = seccomp_root / name
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_PROFILE_BYTES + 1)
        except OSError as exc:
            raise ContainerConfigError(
                f"cannot load seccomp profile {str(path)!r}: {exc.strerror or exc}"
            ) from None
        if len(data) > MAX_PROFILE_BYTES:
            raise ContainerConfigError(
                f"seccomp profile {str(path)!r} is larger than {MAX_PROFILE_BYTES} bytes"
            )
        try:
            loaded = json.loads(data)
        except ValueError as exc:
            raise ContainerConfigError(f"seccomp profile {str(path)!r} is not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise ContainerConfigError(f"seccomp profile {str(path)!r} must be a JSON object")
        return loaded
    raise ContainerConfigError(f"seccompProfile.type {kind!r} is not RuntimeDefault, Localhost or Unconfined")


def _action(seccomp: Any, name: Any, errno_ret: Any, where: str) -> int:
    if name not in _ACTIONS:
        raise ContainerConfigError(f"seccomp profile: {where}: unknown action {name!r}")
    if name == "SCMP_ACT_ERRNO":
        return int(seccomp.ERRNO(int(errno_ret) if isinstance(errno_ret, int) else errno.EPERM))
    return int(
        {
            "SCMP_ACT_ALLOW": seccomp.ALLOW,
            "SCMP_ACT_KILL": seccomp.KILL,
            "SCMP_ACT_KILL_THREAD": seccomp.KILL_THREAD,
            "SCMP_ACT_KILL_PROCESS": seccomp.KILL_PROCESS,
            "SCMP_ACT_TRAP": seccomp.TRAP,
            "SCMP_ACT_LOG": seccomp.LOG,
        }[name]
    )


def build_filter(profile: dict[str, Any], no_new_privs: bool) -> Any:
    """A pyseccomp SyscallFilter for the profile, not yet loaded; syscalls this libseccomp does not know are
    skipped (as runc skips them). Compiled once per distinct profile: every container start and every exec
    probe of a RuntimeDefault pod asks for the same ~350 rules, and the agent never loads a filter itself
    (only forked children do), so one filter object serves them all."""
    try:
        text = json.dumps(profile, sort_keys=True)
    except (TypeError, ValueError):
        raise ContainerConfigError("seccomp profile: not a JSON document") from None
    return _compiled(text, no_new_privs)


@functools.lru_cache(maxsize=64)
def _compiled(text: str, no_new_privs: bool) -> Any:
    import pyseccomp as seccomp  # the system's libseccomp; only a pod asking for seccomp loads it

    profile: dict[str, Any] = json.loads(text)
    default = _action(seccomp, profile.get("defaultAction"), profile.get("defaultErrnoRet"), "defaultAction")
    syscall_filter = seccomp.SyscallFilter(default)
    # libseccomp sets no_new_privs when it loads a filter unless told not to: that is the pod's choice.
    syscall_filter.set_attr(seccomp.Attr.CTL_NNP, 1 if no_new_privs else 0)
    rules = profile.get("syscalls") or []
    if not isinstance(rules, list):
        raise ContainerConfigError("seccomp profile: syscalls must be a list")
    for index, rule in enumerate(rules):
        where = f"syscalls[{index}]"
        if not isinstance(rule, dict) or not isinstance(rule.get("names"), list):
            raise ContainerConfigError(f"seccomp profile: {where}: needs names (a list)")
        action = _action(seccomp, rule.get("action"), rule.get("errnoRet"), where)
        if action == default:
            continue  # libseccomp refuses a rule that repeats the default action
        args = []
        for arg in rule.get("args") or []:
            op = arg.get("op") if isinstance(arg, dict) else None
            if op not in _OPS:
                raise ContainerConfigError(f"seccomp profile: {where}: unknown op {op!r}")
            args.append(
                seccomp.Arg(
                    int(arg["index"]), _OPS.index(op) + 1, int(arg["value"]), int(arg.get("valueTwo", 0))
                )
            )
        for name in rule["names"]:
            try:
                syscall_filter.add_rule(action, str(name), *args)
            except (OSError, ValueError):
                continue  # unknown on this architecture or to this libseccomp
    return syscall_filter


def load_in_child(syscall_filter: Any) -> None:
    """In the child between fork and exec: install the filter (it lasts through exec)."""
    syscall_filter.load()


def seccomp_mode(pid: int | str = "self") -> int:
    """The Seccomp: field of /proc/<pid>/status (0 none, 1 strict, 2 filter)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Seccomp:"):
                return int(line.split()[1])
    return 0
