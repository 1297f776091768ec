"""A container's own /dev, built as runc builds it, inside the container's private mount namespace.

Where it plugs in (wired by agent/kuberuntime/isolation.py): a process pod's container shares the
host's root; agent/volumemanager/namespace.py `enter_container_namespace` runs in the child between
fork and exec, before the child joins its cgroups (the device cgroup included, agent/cm/devicecgroup:
so its mknods are the agent's, and the bind fallback below is for user namespaces), and does
unshare(CLONE_NEWNS), makes every mount private, binds the volumes (shadowing `/` onto a
staging tmpfs and MS_MOVE-ing it to `/` when a mountPath's parent is missing), then chroots there if
it did. `setup_dev(plan)` is to be called right after the mounts are made private and BEFORE the
volumes are bound: at `/dev` of the namespace (root ""), so a volume whose mountPath is under /dev
(an emptyDir at /dev/shm, say) lands on top of it, and a later shadow of `/` binds this /dev back, not
the host's. `/dev` then counts as a directory of the container's own (namespace.py's `fresh` set), so
mount points can be made in it. The parent side is `dev_plan(...)`, called in the agent before the
fork with the container's device specs (ContainerResources.devices, as (host_path, container_path) pairs),
the nodes of its resolved CDI edits (`node_from_cdi`), its privileged flag and the pod's shm
directory; it stats every host node there, so a bad spec fails the container with one line. Every
container then needs a namespace plan, even one without volumes (today only containers with volumes
get one): without it a container sees the host's /dev.

What the child makes (runc libcontainer/rootfs_linux.go, with the mounts of runc's and containerd's
default spec; devices.md section 1):
- /dev: tmpfs, nosuid, strictatime, mode=755, size=65536k;
- the default nodes null, zero, full, random, urandom, tty (mode 0666, root:root), then each planned
  node at its container path, with its type, major:minor, mode and owner (a device spec's node takes
  the host node's mode and owner; a planned node replaces a default one at the same path). Made with
  mknod under a zero umask (so with its exact mode, no chmod), chowned only when its owner is not the
  agent's (root:root, the default nodes, needs no call); where mknod answers EPERM (the device cgroup
  grants no `m` for it, or a user namespace) the host node is bind-mounted onto an empty file instead, as
  runc does. mknod first because a made node carries the spec's mode and owner and does not depend on the
  host node staying where it is; the bind keeps a device usable where mknod is refused. This runs in a
  forked copy of the agent, where every Python call also copies the pages it touches: what can be
  decided before the fork (the symlinks, whether /proc/kcore exists, who the agent is) is, in `dev_plan`;
- /dev/pts: devpts, nosuid, noexec, newinstance, ptmxmode=0666, mode=0620, gid=5;
- /dev/shm: the pod's shm directory bound (containers of a pod share it, as they share the sandbox's
  under containerd), or a tmpfs of its own (nosuid, noexec, nodev, mode=1777, size=65536k);
- /dev/mqueue: mqueue, nosuid, noexec, nodev;
- symlinks fd -> /proc/self/fd, stdin/stdout/stderr -> /proc/self/fd/0..2, ptmx -> pts/ptmx, and
  core -> /proc/kcore only if /proc/kcore exists (runc's rule). No /dev/console: runc makes it only
  for a container with a terminal.
A privileged container gets the host's /dev bind-mounted (recursively) instead: with a shared root
that is what it saw anyway, it stays live (devices hot-plugged later appear), and runc leaves a /dev
that is a bind mount alone (`needsSetupDev`). containerd instead fills a tmpfs with a node for every
host device at creation; the bind is the simpler equal for a pod that shares the host's root.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from agent.cm.devicecgroup.rules import DeviceRuleError, host_device
from agent.volumemanager import mountutil
from kubenode.cdi.edits import DeviceNode as CdiDeviceNode

MS_NOEXEC = 0x8
MS_STRICTATIME = 1 << 24
DEV_TMPFS = (mountutil.MS_NOSUID | MS_STRICTATIME, "mode=755,size=65536k")
PTS = (mountutil.MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5")
SHM_TMPFS = (mountutil.MS_NOSUID | MS_NOEXEC | mountutil.MS_NODEV, "mode=1777,size=65536k")
MQUEUE = mountutil.MS_NOSUID | MS_NOEXEC | mountutil.MS_NODEV
SYMLINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"), ("ptmx", "pts/ptmx"))  # fmt: skip
KCORE = "/proc/kcore"


class DevfsError(ValueError):
    """A /dev that cannot be built as planned: one line naming the device."""


@dataclass(frozen=True)
class DevNode:
    path: str  # absolute, under /dev, in the container
    type: str  # "c" or "b"
    major: int
    minor: int
    mode: int = 0o666  # permission bits
    uid: int = 0
    gid: int = 0
    host_path: str = ""  # bound here where mknod is refused


def _char(name: str, major: int, minor: int) -> DevNode:
    return DevNode(f"/dev/{name}", "c", major, minor, host_path=f"/dev/{name}")


DEFAULT_NODES = (_char("null", 1, 3), _char("zero", 1, 5), _char("full", 1, 7), _char("random", 1, 8),
                 _char("urandom", 1, 9), _char("tty", 5, 0))  # fmt: skip


@dataclass(frozen=True)
class DevPlan:
    nodes: tuple[DevNode, ...] = ()
    privileged: bool = False
    shm_source: str = ""  # a directory bound at /dev/shm; "" makes a tmpfs there
    links: tuple[tuple[str, str], ...] = SYMLINKS  # (name in /dev, target)
    # (uid, gid) a node made by the child gets without a chown (the agent's); None: chown every node.
    creator: tuple[int, int] | None = None


def _container_path(path: str, what: str) -> str:
    clean = os.path.normpath(path) if path.startswith("/") else ""
    if not clean.startswith("/dev/") or clean in ("/dev/pts", "/dev/shm", "/dev/mqueue") or "/pts/" in clean:
        raise DevfsError(
            f"{what}: container path {path!r} must be a node under /dev (a process pod has only its own /dev)"
        )
    return clean


def node_for_device(host_path: str, container_path: str) -> DevNode:
    """The node for a device spec: the host node's type, numbers, mode and owner, at `container_path`."""
    try:
        host = host_device(host_path)
    except DeviceRuleError as exc:
        raise DevfsError(str(exc)) from None
    path = _container_path(container_path, f"device {host_path}")
    return DevNode(path, host.type, host.major, host.minor, host.mode, host.uid, host.gid, host_path)


def node_from_cdi(node: CdiDeviceNode) -> DevNode:
    """A CDI deviceNode, missing numbers filled from its host node (the CDI library's fillMissingInfo)."""
    what = f"CDI device node {node.path}"
    kind = "c" if node.type == "u" else node.type
    if kind == "p":
        raise DevfsError(f"{what}: fifo device nodes are not supported")
    numbers = (node.major, node.minor)
    mode, uid, gid = node.file_mode, node.uid, node.gid
    if not (kind and node.major):
        try:
            host = host_device(node.source)
        except DeviceRuleError as exc:
            raise DevfsError(f"{what}: {exc}") from None
        if kind and kind != host.type:
            raise DevfsError(f"{what}: type {kind} but {node.source} is type {host.type}")
        kind, numbers = host.type, (host.major, host.minor)
        mode = host.mode if mode is None else mode
    path = _container_path(node.path, what)
    mode = 0o666 if mode is None else stat.S_IMODE(mode)
    return DevNode(path, kind, numbers[0], numbers[1], mode, uid or 0, gid or 0, node.source)


def dev_plan(nodes: Iterable[DevNode], privileged: bool = False, shm_source: str = "") -> DevPlan:
    """The container's /dev: the default nodes, each planned node replacing one at its path."""
    by_path = {node.path: node for node in DEFAULT_NODES}
    for node in nodes:
        by_path[node.path] = node
    links = SYMLINKS + ((("core", KCORE),) if os.path.exists(KCORE) else ())
    creator = (os.geteuid(), os.getegid())
    return DevPlan(tuple(by_path.values()), privileged, shm_source, links, creator)


# ----- the child, between fork and exec ---------------------------------------------------------------


def _make_node(root: str, node: DevNode, creator: tuple[int, int] | None) -> None:
    """mknod (the umask is 0 here: the mode is exact), or the host node bound where mknod is refused."""
    target = root + node.path
    if node.path.count("/") > 2:  # below a subdirectory of /dev (/dev/dri/card0): make it first
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    kind = stat.S_IFCHR if node.type == "c" else stat.S_IFBLK
    try:
        os.mknod(target, kind | node.mode, os.makedev(node.major, node.minor))
    except PermissionError:
        if not node.host_path:
            raise DevfsError(f"device {node.path}: mknod refused and no host node to bind") from None
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0))
        mountutil.mount(node.host_path, target, None, mountutil.MS_BIND)
        return
    if creator != (node.uid, node.gid):
        os.chown(target, node.uid, node.gid)


def _mkdir_mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    os.mkdir(target, 0o755)
    mountutil.mount(source, target, fstype, flags, data)


def setup_dev(plan: DevPlan, root: str = "") -> None:
    """Build `root`/dev in the current (private) mount namespace (see the module's docstring)."""
    dev = root + "/dev"
    if plan.privileged:
        mountutil.mount("/dev", dev, None, mountutil.MS_BIND | mountutil.MS_REC)
        return
    mountutil.mount("tmpfs", dev, "tmpfs", *DEV_TMPFS)
    umask = os.umask(0)
    try:
        for node in plan.nodes:
            try:
                _make_node(root, node, plan.creator)
            except OSError as exc:
                raise DevfsError(f"device {node.path}: {exc.strerror or exc}") from None
    finally:
        os.umask(umask)  # the container's process gets the agent's, as before
    _mkdir_mount("devpts", f"{dev}/pts", "devpts", *PTS)
    if plan.shm_source:
        _mkdir_mount(plan.shm_source, f"{dev}/shm", None, mountutil.MS_BIND | mountutil.MS_REC)
    else:
        _mkdir_mount("shm", f"{dev}/shm", "tmpfs", *SHM_TMPFS)
    _mkdir_mount("mqueue", f"{dev}/mqueue", "mqueue", MQUEUE)
    for name, target in plan.links:
        try:
            os.symlink(target, f"{dev}/{name}")
        except FileExistsError:  # a planned node took the name
            continue
