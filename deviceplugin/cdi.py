"""The CDI spec that pins containers to their CPUs under a real kubelet: kind `kubenode.io/cpuset`.

The Device Plugin API cannot set a cpuset; it can return CDI device names, whose container edits the
runtime applies (containerd >= 1.7 with CDI enabled, containerd 2.x, CRI-O, podman). Flow:

1. `CpuBackend.allocate` calls `CpusetSpec.add(cpus)`, which writes the entry before Allocate answers
   (a temporary file in the same directory, then a rename: a runtime never reads half a file) and returns
   the qualified name, e.g. `kubenode.io/cpuset=2-3`, which goes into `cdi_devices`.
2. The runtime applies the device's edits: `KUBENODE_CPUSET=2-3` and a `createRuntime` hook
   `<hook command> cpuset --cpus 2-3` (deviceplugin.cdihook, started as deviceplugin.hookcommand says)
   that writes the container's cpuset.
3. `allocated_cpusets` asks the kubelet's PodResources `List` which CPU sets our resource still holds;
   `CpusetSpec.prune` drops the other entries, except those added within `grace` seconds (the kubelet
   records an allocation only after Allocate answers). Without PodResources nothing is pruned, nor on an
   answer that lists no pod from a kubelet other than the one that last listed pods (`CpuBackend.prune_cdi`:
   a kubelet that has just started answers before it knows its pods).

4. At start (`CpusetSpec.refresh`, from `CpuBackend.start`) an existing file of ours is adopted: its CPU sets
   stay (the kubelet restarts a container without a new Allocate), and every entry is rewritten with this
   plugin's hook command if any differs, since an entry of an earlier install may name a hook that is gone
   (another venv, a moved checkout). Later, an Allocate finding the file changed behind our back (removed,
   or written by someone else) rewrites it too. Building the spec only reads: `discover` builds backends.

Device names are the CPU list with `,` written `_` (CDI names allow only `[A-Za-z0-9_.-]`): `0-1,4` is
`kubenode.io/cpuset=0-1_4`. A name starting with a digit needs cdiVersion 0.5.0, the lowest we can use.
One spec file per resource (`kubenode-cpuset_<resource>.json`); it is the only file here ever read,
written or removed: other vendors' specs and broken files in the same directory are left alone. A stopping
plugin leaves it (a restarted container of a held set needs its entry); `remove_spec` removes it on
uninstall (`kubenode deviceplugin remove-cdi-specs`), when the hook it names is about to go.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from deviceplugin.hookcommand import HookCommand
from kubenode.cpuset import format_cpuset, parse_cpuset
from kubenode.devicecontract import CPUSET_ENV

log = logging.getLogger(__name__)

CDI_VERSION = "0.5.0"  # 0.5.0 allows device names that start with a digit; nothing newer is used
KIND = "kubenode.io/cpuset"
HOOK_NAME = "createRuntime"  # runs in the runtime's namespaces: host pid, host cgroup tree
HOOK_TIMEOUT_S = 10  # a hung hook fails the container start instead of blocking it
PODRESOURCES_TIMEOUT_S = 5.0


class SpecError(RuntimeError):
    """Our spec file cannot be used (it belongs to someone else, or is unreadable)."""


def device_name(cpus: Iterable[int]) -> str:
    return format_cpuset(cpus).replace(",", "_")


def qualified_name(cpus: Iterable[int]) -> str:
    return f"{KIND}={device_name(cpus)}"


def spec_file_name(resource_name: str) -> str:
    return "kubenode-cpuset_" + resource_name.replace("/", "_") + ".json"


def device_entry(cpus: frozenset[int], hook: HookCommand) -> dict[str, Any]:
    cpu_list = format_cpuset(cpus)
    return {
        "name": device_name(cpus),
        "containerEdits": {
            "env": [f"{CPUSET_ENV}={cpu_list}"],
            "hooks": [
                {
                    "hookName": HOOK_NAME,
                    "path": hook.path,
                    "args": hook.argv(cpu_list),
                    "timeout": HOOK_TIMEOUT_S,
                }
            ],
        },
    }


class CpusetSpec:
    """Our spec file's entries, one per allocated CPU set; thread-safe (Allocate runs on gRPC threads)."""

    def __init__(
        self,
        spec_dir: str | os.PathLike[str],
        file_name: str,
        hook: HookCommand,
        *,
        grace: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(spec_dir) / file_name
        self.hook = hook
        self.grace = grace
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[frozenset[int], float]] = {}  # name -> (CPUs, when added)
        # Only read here (discover builds backends too); refresh, add or prune rewrites the file.
        self._stale_hooks: set[str] = set()  # the hooks of entries on disk that differ from ours
        for cpus, hooks in self._load():
            self._entries[device_name(cpus)] = (cpus, clock())
            self._stale_hooks.update(hooks)
        # The file as we last wrote (or adopted) it: inode, mtime, size; None when there is none.
        self._written = _signature(self.path)

    def _load(self) -> list[tuple[frozenset[int], set[str]]]:
        """Our file's CPU sets from a previous run, each with the hook paths its entry names."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise SpecError(f"{self.path}: unreadable, refusing to overwrite it: {exc}") from None
        if not isinstance(data, dict) or data.get("kind") != KIND:
            kind = data.get("kind") if isinstance(data, dict) else None
            raise SpecError(f"{self.path}: kind {kind!r} is not {KIND}, refusing to overwrite it")
        result = []
        for device in data.get("devices") or []:
            try:
                cpus = parse_cpuset(str(device["name"]).replace("_", ","))
            except (KeyError, TypeError, ValueError):
                raise SpecError(f"{self.path}: device {device!r} is not a CPU set, refusing it") from None
            if cpus:
                entry = device_entry(cpus, self.hook)
                # Any difference (another hook, its args, timeout or env) makes the entry stale.
                hooks = set() if device == entry else {_hook_paths(device) or "no hook"}
                result.append((cpus, hooks))
        return result

    def refresh(self) -> list[str]:
        """At start: rewrite every entry with our hook if any differs; returns the other hooks it named."""
        with self._lock:
            stale = sorted(self._stale_hooks)
            if stale:
                self._write()
            return stale

    def add(self, cpus: frozenset[int]) -> str:
        """Make sure the entry for `cpus` is on disk; returns its qualified CDI name."""
        name = device_name(cpus)
        with self._lock:
            known = name in self._entries
            self._entries[name] = (cpus, self._clock())  # a fresh Allocate restarts the grace period
            # Also when the file is not as we wrote it: stale entries, removed or rewritten meanwhile.
            if not known or self._stale_hooks or self._written != _signature(self.path):
                self._write()
        return f"{KIND}={name}"

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._entries)

    def prune(self, in_use: Iterable[frozenset[int]]) -> list[str]:
        """Drop entries no longer allocated (and past the grace period); returns the dropped names."""
        keep = {device_name(cpus) for cpus in in_use}
        now = self._clock()
        with self._lock:
            dropped = [
                name
                for name, (_, added) in self._entries.items()
                if name not in keep and now - added >= self.grace
            ]
            for name in dropped:
                del self._entries[name]
            if dropped:
                self._write()
        return sorted(dropped)

    def _write(self) -> None:
        """Replace the file atomically; with no entries remove it (a spec without devices is invalid)."""
        self._stale_hooks.clear()  # every entry written from here on runs our hook
        if not self._entries:
            self.path.unlink(missing_ok=True)
            self._written = None
            return
        spec = {
            "cdiVersion": CDI_VERSION,
            "kind": KIND,
            "devices": [device_entry(cpus, self.hook) for cpus, _ in self._sorted_entries()],
        }
        # A dot-file ending in .tmp: CDI registries read only *.json and *.yaml, so never this one.
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)  # cdi: true on a node whose runtime made none
        try:
            with open(temporary, "w") as out:
                json.dump(spec, out, indent=2)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, 0o644)
            os.replace(temporary, self.path)
            self._written = _signature(self.path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    def _sorted_entries(self) -> list[tuple[frozenset[int], float]]:
        return sorted(self._entries.values(), key=lambda entry: sorted(entry[0]))


def remove_spec(spec_dir: str | os.PathLike[str], resource_name: str) -> Path | None:
    """Remove our spec file of `resource_name`; returns its path, None if absent. SpecError if not ours."""
    path = Path(spec_dir) / spec_file_name(resource_name)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SpecError(f"{path}: unreadable, leaving it: {exc}") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind != KIND:
        raise SpecError(f"{path}: kind {kind!r} is not {KIND}, leaving it")
    path.unlink(missing_ok=True)
    return path


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _hook_paths(device: Any) -> str:
    """The hook paths an entry read from disk names, for the log line; "" when it has none."""
    try:
        hooks = device["containerEdits"]["hooks"]
        return ", ".join(str(hook["path"]) for hook in hooks)
    except (KeyError, TypeError):
        return ""


def socket_identity(path: str) -> tuple[int, int] | None:
    """(inode, ctime) of a socket, which a restarted server makes anew; None when it is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns


def allocated_cpusets(
    socket_path: str, resource_name: str, cpus_of: Mapping[str, frozenset[int]]
) -> tuple[list[frozenset[int]], int] | None:
    """The CPU set of every container holding `resource_name`, from PodResources List, with the number of
    pods the answer listed; None if unreachable.

    A container's devices of one resource may come in several entries (one per NUMA node); their union is
    the set its Allocate got. Replica IDs (`cpu3::1`) count as their device.
    """
    if not os.path.exists(socket_path):
        return None
    import grpc

    from kubenode.api.podresources.v1 import api_pb2, api_pb2_grpc

    try:
        with grpc.insecure_channel(f"unix://{socket_path}") as channel:
            stub = api_pb2_grpc.PodResourcesListerStub(channel)
            response = stub.List(api_pb2.ListPodResourcesRequest(), timeout=PODRESOURCES_TIMEOUT_S)
    except grpc.RpcError as exc:
        log.debug("PodResources List at %s failed: %s", socket_path, exc)
        return None
    result = []
    for pod in response.pod_resources:
        for container in pod.containers:
            cpus = frozenset(
                cpu
                for devices in container.devices
                if devices.resource_name == resource_name
                for device_id in devices.device_ids
                for cpu in cpus_of.get(device_id.split("::")[0], ())
            )
            if cpus:
                result.append(cpus)
    return result, len(response.pod_resources)
