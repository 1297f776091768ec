"""Which container a process in a pod cgroup is: what adoption and the stats trust instead of the record.

The kernel is asked first, as the kubelet asks its runtime: a process in a container's own cgroup (the
directory below the pod's, agent/cm/cgroups/naming.py `container_dir`) IS that container, from the moment
the child joins it, before it has exec'd anything and whatever it does to its environment later. The
identity stamped at spawn (`KUBENODE_CONTAINER=<pod uid>/<container>/<spawn id>` in the environment,
processes.spawn) adds the spawn id, which tells one spawn of a container from another; it is also the
only marker of a process that runs in the pod cgroup itself (started before container cgroups existed,
or a hollow node's). The stamp is the first entry of the environment passed to execve, but a shell that
execs another program (`sh -c '...; exec sleep'`) rebuilds the environment in its own order, so the
whole environ is searched (bounded), not only its head.

`stamped_processes` lists the session leaders among a pod cgroup's pids with their identity, oldest
first: a container's descendants share its session, so each spawn is one `StampedProcess`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from agent.cm.cgroups.naming import POD_PREFIX, SCOPE_PREFIX, SCOPE_SUFFIX, SLICE_SUFFIX

IDENTITY_ENV = "KUBENODE_CONTAINER"
_STAMP = IDENTITY_ENV.encode() + b"="
_ENVIRON_CHUNK = 65536
# An environment is at most a few MiB (ARG_MAX); a scan stops here whatever a process holds.
_ENVIRON_READ_LIMIT = 4 << 20


@dataclass(frozen=True)
class Identity:
    pod_uid: str
    container: str
    spawn_id: str  # "" when only the cgroup is known (the child has not exec'd, or dropped its stamp)

    def __str__(self) -> str:
        return f"{self.pod_uid}/{self.container}/{self.spawn_id}"

    @classmethod
    def new(cls, pod_uid: str, container: str) -> Identity:
        return cls(pod_uid, container, secrets.token_hex(6))

    @classmethod
    def parse(cls, text: str) -> Identity | None:
        parts = text.split("/")
        return cls(*parts) if len(parts) == 3 and all(parts) else None


@dataclass(frozen=True)
class StampedProcess:
    """A container process found in a pod cgroup: a session leader carrying an identity."""

    pid: int
    create_time: float
    identity: Identity


def read_identity(pid: int) -> Identity | None:
    """The identity stamped on a process, or None (not ours, gone, a zombie, unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = b"\0"
            while len(data) < _ENVIRON_READ_LIMIT:
                chunk = f.read(_ENVIRON_CHUNK)
                if not chunk:
                    break
                data += chunk
                start = data.find(b"\0" + _STAMP)
                if start >= 0 and data.find(b"\0", start + 1) >= 0:
                    break  # the whole entry is in
    except OSError:
        return None
    start = data.find(b"\0" + _STAMP)
    if start < 0:
        return None
    value = data[start + 1 + len(_STAMP) :].split(b"\0", 1)[0]
    return Identity.parse(value.decode("utf-8", "replace"))


def container_of_cgroup(pid: int) -> tuple[str, str] | None:
    """(pod uid, container) when the process sits in a container's own cgroup; else None."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
            return container_in(f.read())
    except OSError:
        return None


def container_in(proc_cgroup: str) -> tuple[str, str] | None:
    """(pod uid, container) from a /proc/<pid>/cgroup text whose path is a container's cgroup directly below
    a pod cgroup (cgroupfs `.../pod<uid>/<name>`, systemd `...-pod<uid_>.slice/kubenode-<name>.scope`)."""
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)[-1].rsplit("/", 2)
        if len(parts) < 3:
            continue
        pod_dir, leaf = parts[1], parts[2]
        if pod_dir.endswith(SLICE_SUFFIX):  # systemd: the UID's '-' are escaped to '_'
            pod_dir = pod_dir[: -len(SLICE_SUFFIX)].rsplit("-", 1)[-1].replace("_", "-")
            if not (leaf.startswith(SCOPE_PREFIX) and leaf.endswith(SCOPE_SUFFIX)):
                continue
            leaf = leaf[len(SCOPE_PREFIX) : -len(SCOPE_SUFFIX)]
        if pod_dir.startswith(POD_PREFIX) and len(pod_dir) > len(POD_PREFIX) and leaf:
            return pod_dir[len(POD_PREFIX) :], leaf
    return None


def process_identity(pid: int) -> Identity | None:
    """The container a process is: its container cgroup's (with the stamp's spawn id when the stamp names
    the same container), else its stamp's; None for a process of neither. A stamp naming another pod than
    the cgroup path is trusted over the path."""
    stamp = read_identity(pid)
    placed = container_of_cgroup(pid)
    if placed is None or (stamp is not None and stamp.pod_uid != placed[0]):
        return stamp  # no container cgroup, or a path that only looks like one (a container's own sub-cgroup)
    pod_uid, container = placed
    same = stamp is not None and (stamp.pod_uid, stamp.container) == placed
    return Identity(pod_uid, container, stamp.spawn_id if stamp is not None and same else "")


def stamped_processes(pids: Iterable[int]) -> list[StampedProcess]:
    """The session leaders among `pids` that are a container's (see `process_identity`), oldest first."""
    found = []
    for pid in pids:
        try:
            if os.getsid(pid) != pid:
                continue  # a descendant: it belongs to its session leader's container
            proc = psutil.Process(pid)
            create_time = float(proc.create_time())
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
        except (OSError, psutil.Error):
            continue
        identity = process_identity(pid)
        if identity is not None:
            found.append(StampedProcess(pid, create_time, identity))
    return sorted(found, key=lambda p: (p.create_time, p.pid))
