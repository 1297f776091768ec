"""`kubenode cdi-hook cpuset --cpus LIST`: the OCI createRuntime hook that pins a container to its CPUs.

The cpu backend's CDI spec (deviceplugin.cdi) asks the runtime to run this hook for a container that got
`kubenode.io/cpuset=<set>`. The runtime (runc, crun) runs it after it has created the container's cgroup
and its init process, and before the user's process starts, in the runtime's own namespaces: the state's
`pid` is a host pid and the host's cgroup tree is visible. Flow:

1. Read the OCI state JSON on stdin: `pid` (the container's init) and `bundle` (its directory).
2. Read `linux.cgroupsPath` from `<bundle>/config.json` and resolve it to a directory of the cpuset
   hierarchy: a cgroupfs path (absolute, or relative to this process's cgroup, as runc does) or the
   systemd form `slice:prefix:name` (`a-b.slice` nests as `a.slice/a-b.slice`); on cgroup v1 (the
   `cpuset` hierarchy) or v2 (the unified one), found in /proc/self/mountinfo.
3. The CPUs are `--cpus` and those of every other cpuset hook in the config's `hooks.createRuntime` (one
   per CDI device: a container with a two-CPU DRA claim runs two hooks, and each pins to both).
   Check the cgroup exists and holds the init pid, and that the CPUs are within the parent's cpuset.
4. Write `cpuset.cpus`, then set the affinity of every thread of the init process.

Any failure prints one line `kubenode cdi-hook: <reason>` on stderr and exits 1 (2 for bad arguments), so
the runtime refuses to start the container rather than run it unpinned.

It runs on every container start, so it must start as fast as the bare interpreter: it imports only `os`,
`sys`, `_json` (the C scanner that `json.loads` runs; `import json` itself pulls in `re` and costs more
than the whole hook) and kubenode.cpuset (standard library only, nothing at run time). The CDI spec runs it
as `python -I -S -c <bootstrap> <package root> cpuset --cpus LIST` (deviceplugin.hookcommand): no site, no
environment, only these modules of kubenode on the path. The same modules, with a copied interpreter, are
what the DaemonSet's init container installs on hosts that have no Python (deviceplugin.hookbundle).
`kubenode cdi-hook` runs it in-process.
"""

import os
import sys

from kubenode.cpuset import TYPE_CHECKING, format_cpuset, parse_cpuset

if TYPE_CHECKING:  # kubenode.cpuset's stand-in for typing.TYPE_CHECKING: typing costs an import
    from collections.abc import Sequence

PROG = "kubenode cdi-hook"
USAGE = f"usage: {PROG} cpuset --cpus LIST   (reads the OCI state JSON on stdin)"
DEFAULT_SYSTEMD_SLICE = "system.slice"  # runc's parent when the slice part of `slice:prefix:name` is empty


class HookError(Exception):
    """Why the container must not start; the message is the one line the runtime shows."""


class UsageError(HookError):
    pass


def main(argv: "Sequence[str]") -> int:
    """Entry for `kubenode cdi-hook ...` (argv without the `cdi-hook` word)."""
    try:
        cpus = parse_args(argv)
        pin(cpus, sys.stdin.read())
    except UsageError as exc:
        print(f"{PROG}: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    except HookError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    return 0


def parse_args(argv: "Sequence[str]") -> frozenset[int]:
    """`cpuset --cpus LIST` or `cpuset --cpus=LIST`, by hand: argparse alone costs more than the work."""
    args = list(argv)
    if not args or args[0] != "cpuset":
        raise UsageError(f"unknown hook {args[0]!r}" if args else "which hook? (only `cpuset` exists)")
    rest = args[1:]
    if len(rest) == 1 and rest[0].startswith("--cpus="):
        text = rest[0].removeprefix("--cpus=")
    elif len(rest) == 2 and rest[0] == "--cpus":
        text = rest[1]
    else:
        raise UsageError(f"expected --cpus LIST, got {' '.join(rest) or 'nothing'}")
    try:
        cpus = parse_cpuset(text)
    except ValueError as exc:
        raise UsageError(f"--cpus: {exc}") from None
    if not cpus:
        raise UsageError("--cpus: empty CPU list")
    return cpus


def pin(cpus: frozenset[int], state_text: str, proc: str = "/proc") -> None:
    """Write `cpus`, with the CPUs of every other cpuset hook of the container (`other_hook_cpus`), into
    its cpuset cgroup and its init's affinity; HookError on any problem."""
    pid, bundle = read_state(state_text)
    config = read_config(bundle)
    cgroups_path = cgroups_path_of(config, bundle)
    cpus = cpus | other_hook_cpus(config)
    hierarchy = CpusetHierarchy.find(_read(f"{proc}/self/mountinfo"))
    own = hierarchy.cgroup_of(_read(f"{proc}/self/cgroup"))
    cgroup = resolve_cgroup(cgroups_path, own)
    directory = hierarchy.directory(cgroup)
    if not os.path.isdir(directory):
        raise HookError(f"unknown cgroup {cgroup} (linux.cgroupsPath {cgroups_path!r}): no {directory}")
    actual = hierarchy.cgroup_of(_read(f"{proc}/{pid}/cgroup"))
    if actual != cgroup:
        raise HookError(f"container process {pid} is in cgroup {actual}, not {cgroup} (linux.cgroupsPath)")
    parent = os.path.dirname(directory)
    allowed = parse_cpuset(_read(os.path.join(parent, hierarchy.effective_cpus_file)))
    if not cpus <= allowed:
        raise HookError(
            f"CPUs {format_cpuset(cpus - allowed)} are outside the parent cgroup's cpuset "
            f"{format_cpuset(allowed) or '(empty)'} ({parent})"
        )
    target = os.path.join(directory, "cpuset.cpus")
    if not os.path.exists(target):
        raise HookError(f"no cpuset controller in {directory} (cgroup v2: enable cpuset in the parent)")
    try:
        with open(target, "w") as out:
            out.write(format_cpuset(cpus))
    except OSError as exc:
        raise HookError(f"cannot write {target}: {exc.strerror}") from None
    set_affinity(pid, cpus, proc)


def read_state(text: str) -> tuple[int, str]:
    try:
        state = loads(text)
    except ValueError:
        raise HookError("stdin is not the OCI state JSON (is this running as an OCI hook?)") from None
    pid, bundle = (state.get("pid"), state.get("bundle")) if isinstance(state, dict) else (None, None)
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise HookError(f"OCI state: pid {pid!r} is not a process id")
    if not isinstance(bundle, str) or not bundle:
        raise HookError(f"OCI state: bundle {bundle!r} is not a directory")
    return pid, bundle


def read_config(bundle: str) -> object:
    path = os.path.join(bundle, "config.json")
    try:
        with open(path, encoding="utf-8") as config_file:
            return loads(config_file.read())
    except OSError as exc:
        raise HookError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise HookError(f"{path}: not valid JSON") from None


def cgroups_path_of(config: object, bundle: str) -> str:
    linux = config.get("linux") if isinstance(config, dict) else None
    value = linux.get("cgroupsPath") if isinstance(linux, dict) else None
    if not isinstance(value, str) or not value:
        path = os.path.join(bundle, "config.json")
        raise HookError(f"{path}: no linux.cgroupsPath (the container has no cgroup of its own to pin)")
    return value


def other_hook_cpus(config: object) -> frozenset[int]:
    """The CPUs of every cpuset hook in the container's `hooks.createRuntime` (args ending `cpuset --cpus
    LIST` or `cpuset --cpus=LIST`). A container given several CPU devices has one hook per CDI device: a DRA
    claim of two CPUs is two devices, `cpu-0` and `cpu-1`, each with its own hook, and a container may hold a
    claim and `kubenode.io/cpu` too. The runtime runs them one after the other, so each hook pins to all of
    them: whichever runs last, the container gets the union (each one alone pinned to its own CPU, and the
    last one run won: found under kubelet 1.37 and containerd 2.4, docs/interop.md)."""
    hooks = config.get("hooks") if isinstance(config, dict) else None
    entries = hooks.get("createRuntime") if isinstance(hooks, dict) else None
    found: set[int] = set()
    for entry in entries if isinstance(entries, list) else ():
        args = entry.get("args") if isinstance(entry, dict) else None
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            continue
        if len(args) >= 3 and args[-3:-1] == ["cpuset", "--cpus"]:
            text = args[-1]
        elif len(args) >= 2 and args[-2] == "cpuset" and args[-1].startswith("--cpus="):
            text = args[-1].removeprefix("--cpus=")
        else:
            continue
        try:
            found.update(parse_cpuset(text))
        except ValueError:
            continue  # not ours after all; its own run refuses it
    return frozenset(found)


def resolve_cgroup(cgroups_path: str, own_cgroup: str) -> str:
    """The cgroup (an absolute path inside the hierarchy) that `linux.cgroupsPath` names."""
    if cgroups_path.startswith("/"):
        return os.path.normpath(cgroups_path)
    if ":" in cgroups_path:
        return systemd_cgroup(cgroups_path)
    # runc: a relative cgroupfs path is below the runtime's own cgroup, which this hook (its child) shares.
    return os.path.normpath(os.path.join(own_cgroup, cgroups_path))


def systemd_cgroup(cgroups_path: str) -> str:
    """`slice:prefix:name` as runc's systemd driver lays it out: <expanded slice>/<prefix>-<name>.scope."""
    parts = cgroups_path.split(":")
    if len(parts) != 3:
        raise HookError(f"linux.cgroupsPath {cgroups_path!r} is neither a path nor slice:prefix:name")
    slice_name, prefix, name = parts
    if not name:
        raise HookError(f"linux.cgroupsPath {cgroups_path!r}: empty unit name")
    unit = name if name.endswith(".slice") else f"{prefix}-{name}.scope"
    return os.path.join(expand_slice(slice_name or DEFAULT_SYSTEMD_SLICE), unit)


def expand_slice(slice_name: str) -> str:
    """systemd's slice nesting: `a-b-c.slice` is /a.slice/a-b.slice/a-b-c.slice; `-.slice` is the root."""
    if slice_name == "-.slice":
        return "/"
    base = slice_name.removesuffix(".slice")
    if base == slice_name or "/" in base or not base or "" in base.split("-"):
        raise HookError(f"invalid systemd slice {slice_name!r} in linux.cgroupsPath")
    path, prefix = "", ""
    for part in base.split("-"):
        prefix = f"{prefix}-{part}" if prefix else part
        path += f"/{prefix}.slice"
    return path


class CpusetHierarchy:
    """Where cpuset files live: the v1 `cpuset` hierarchy if mounted (hybrid hosts), else the v2 one."""

    def __init__(self, version: int, mountpoint: str, root: str) -> None:
        self.version, self.mountpoint, self.root = version, mountpoint, root
        self.effective_cpus_file = "cpuset.effective_cpus" if version == 1 else "cpuset.cpus.effective"

    @classmethod
    def find(cls, mountinfo: str) -> "CpusetHierarchy":
        unified: CpusetHierarchy | None = None
        for line in mountinfo.splitlines():
            fields = line.split()
            if "-" not in fields:
                continue
            tail = fields[fields.index("-") + 1 :]
            if len(tail) < 3 or len(fields) < 5:
                continue
            fstype, options = tail[0], tail[2].split(",")
            if fstype == "cgroup" and "cpuset" in options:
                return cls(1, _unescape(fields[4]), _unescape(fields[3]))
            if fstype == "cgroup2" and unified is None:
                unified = cls(2, _unescape(fields[4]), _unescape(fields[3]))
        if unified is None:
            raise HookError("no cpuset cgroup hierarchy is mounted (neither cgroup v1 cpuset nor cgroup2)")
        return unified

    def cgroup_of(self, proc_cgroup: str) -> str:
        """A process's cgroup in this hierarchy, from /proc/<pid>/cgroup."""
        for line in proc_cgroup.splitlines():
            if line.count(":") < 2:
                continue
            _, controllers, path = line.split(":", 2)
            if (self.version == 1 and "cpuset" in controllers.split(",")) or (
                self.version == 2 and line.startswith("0::")
            ):
                return path
        raise HookError(
            f"no cgroup v{self.version} {'cpuset ' if self.version == 1 else ''}line in the process"
        )

    def directory(self, cgroup: str) -> str:
        relative = cgroup
        if self.root != "/" and (cgroup == self.root or cgroup.startswith(self.root + "/")):
            relative = cgroup[len(self.root) :]  # the mount shows only a sub-tree (e.g. a cgroup namespace)
        return os.path.normpath(self.mountpoint + "/" + relative.lstrip("/"))


def set_affinity(pid: int, cpus: frozenset[int], proc: str = "/proc") -> None:
    """Every thread of the init process (runc's init is multi-threaded); the kernel already did it on v1
    when cpuset.cpus changed, but v2 and threads created meanwhile make doing it here worth the syscalls."""
    try:
        threads = [int(tid) for tid in os.listdir(f"{proc}/{pid}/task")]
    except OSError as exc:
        raise HookError(f"container process {pid}: {exc.strerror}") from None
    for tid in threads:
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            if tid == pid:
                raise HookError(f"container process {pid} exited before it could be pinned") from None
        except OSError as exc:
            raise HookError(f"cannot set the affinity of {tid} to {format_cpuset(cpus)}: {exc}") from None


def _read(path: str) -> str:
    try:
        with open(path) as source:
            return source.read()
    except OSError as exc:
        raise HookError(f"cannot read {path}: {exc.strerror}") from None


MOUNTINFO_ESCAPES = (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\"))


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes; the backslash comes last."""
    for escaped, plain in MOUNTINFO_ESCAPES:
        field = field.replace(escaped, plain)
    return field


class _JSONOptions:
    """What `_json.make_scanner` reads from json.JSONDecoder: plain dicts, ints and floats, strict strings."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity, as json.loads gives them


def loads(text: str) -> object:
    """`json.loads` through its C scanner alone; ValueError for anything that is not one JSON document."""
    try:
        from _json import make_scanner
    except ImportError:  # an interpreter without the accelerator (not CPython): the full module
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip())
    if start == len(text):  # the scanner fails badly on an empty document (SystemError in 3.11)
        raise ValueError("empty input, not a JSON document")
    try:
        value, end = make_scanner(_JSONOptions)(text, start)  # type: ignore[arg-type]
    except (StopIteration, ValueError, RecursionError, SystemError):
        # The scanner raises its syntax errors as json.decoder.JSONDecodeError, which it finds only when
        # json.decoder was imported; otherwise it fails with SystemError. Either way: not JSON.
        raise ValueError("not a JSON document") from None
    if text[end:].strip():
        raise ValueError(f"extra data after the JSON document at offset {end}")
    return value
