"""Each container's own mount namespace, in which its volumeMounts appear at their mountPaths.

Process pods have no image and no root filesystem of their own, so a container sees the host's
filesystem, in a private copy of the host's mount table with its volumes bind-mounted into it.

Parent side, `container_mounts(container, volumes)`: the plan, checked before anything is forked: each
volumeMount's host source (the volume directory, or `subPath` inside it: made as a directory for emptyDir
and hostPath when missing, as the kubelet does, and refused when it resolves outside the volume through a
symlink), its absolute, normalised mountPath, and whether it is read-only (asked for, or a configMap,
secret, downwardAPI or projected volume, which kube always mounts read-only). A subPath of a configMap
volume is resolved to the file in the current timestamped directory, so, as in kube, an update does not
reach a subPath mount. A plan that cannot be honoured raises MountPlanError and the container is not run.

Child side, `enter_container_namespace(plan)`, called between fork and exec just before the child joins
its container cgroups (agent/kuberuntime/processes.py says why): unshare(CLONE_NEWNS); make every mount
private (recursively), so nothing the container mounts or unmounts propagates to the host and back; build
the container's own /dev (agent/kuberuntime/devfs.py `setup_dev`, with the plan's device nodes); then, in the
order of their depth, bind each volume at its mountPath, read-only where asked; finally chdir to the
workingDir (the cwd was set before the mounts, and a workingDir may be a mountPath).

A missing mountPath is made inside the namespace only: the nearest existing parent directory P is
*shadowed*: a tmpfs is mounted over P (in the namespace) and every entry P had is bound back onto it
(directories recursively, with their submounts; symlinks copied), so the container sees P as before plus
the new mount point, and the host's P is untouched. When P is `/` itself, the shadow is built on a
staging directory in the pod's state directory and moved onto `/` (MS_MOVE, then chroot), as
switch_root does. Inside a shadow, and inside an emptyDir already bound in, mount points are just made.
Any failure aborts the child before exec (the namespace dies with it, so nothing is half-mounted) and
the reason goes back to the agent through `error_fd`.

This is the one place a container's mount namespace is set up: securityContext
(readOnlyRootFilesystem, fsGroup) extends `enter_container_namespace`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from agent.container.volumes import MountedVolume
from agent.kuberuntime.devfs import DevPlan, setup_dev
from agent.volumemanager import mountutil
from kubenode.model import Container

SHADOW_FLAGS = mountutil.MS_NOSUID | mountutil.MS_NODEV


class MountPlanError(Exception):
    pass


@dataclass(frozen=True)
class BindMount:
    source: str  # on the host
    target: str  # the mountPath, absolute and normalised
    read_only: bool
    is_dir: bool
    # The source is the pod's own writable volume (an emptyDir): mount points may be made inside it.
    owned: bool = False


@dataclass(frozen=True)
class NamespacePlan:
    mounts: tuple[BindMount, ...]
    staging: str  # an empty directory of the pod's, for a shadow of `/`
    working_dir: str = ""
    error_fd: int = -1
    # securityContext.readOnlyRootFilesystem: a shadow of / binds the host's top-level entries back
    # read-only, so the root stays read-only when the securityContext remounts / (the shadow) read-only.
    read_only_root: bool = False
    # The container's own /dev (agent/kuberuntime/devfs.py), built before the mounts so that a mountPath
    # under /dev lands on it; None leaves the host's /dev (tests of the mounts alone).
    dev: DevPlan | None = None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _subpath_source(volume: MountedVolume, sub_path: str, volume_name: str) -> str:
    base = os.path.realpath(volume.path)
    candidate = os.path.join(volume.path, sub_path)
    if not os.path.lexists(candidate):
        if not volume.makes_subpaths:
            raise MountPlanError(f'subPath "{sub_path}" does not exist in volume "{volume_name}"')
        os.makedirs(candidate, mode=0o750, exist_ok=True)
    resolved = os.path.realpath(candidate)
    if not _inside(resolved, base):
        raise MountPlanError(f'subPath "{sub_path}" of volume "{volume_name}" resolves outside the volume')
    return resolved


def container_mounts(container: Container, volumes: Mapping[str, MountedVolume]) -> tuple[BindMount, ...]:
    plan = []
    seen: set[str] = set()
    for mount in container.volume_mounts:
        volume = volumes.get(mount.name)
        if volume is None:
            raise MountPlanError(f'volumeMount "{mount.name}": the pod has no volume of that name')
        if not mount.mount_path.startswith("/"):
            raise MountPlanError(
                f'volumeMount "{mount.name}": mountPath {mount.mount_path!r} must be absolute'
            )
        target = os.path.normpath(mount.mount_path)
        if target.startswith("//"):
            target = "/" + target.lstrip("/")
        if target == "/":
            raise MountPlanError(f'volumeMount "{mount.name}": a volume cannot be mounted on /')
        if target in seen:
            raise MountPlanError(f'volumeMount "{mount.name}": mountPath {target} is used twice')
        seen.add(target)
        source = _subpath_source(volume, mount.sub_path, mount.name) if mount.sub_path else volume.path
        try:
            is_dir = stat.S_ISDIR(os.stat(source).st_mode)
        except OSError as exc:
            raise MountPlanError(f'volume "{mount.name}": {source}: {exc.strerror}') from None
        plan.append(
            BindMount(
                source,
                target,
                read_only=mount.read_only or volume.read_only,
                is_dir=is_dir,
                owned=volume.pod_owned and not volume.read_only,
            )
        )
    return tuple(sorted(plan, key=lambda m: (m.target.count("/"), m.target)))


# ----- the child, between fork and exec ---------------------------------------------------------------


def _nearest_existing(path: str, root: str) -> str:
    parent = os.path.dirname(path)
    while parent != "/" and not os.path.lexists(root + parent):
        parent = os.path.dirname(parent)
    return parent


def _populate(fd: int, into: str, read_only: bool) -> None:
    """Bind every entry of the directory open as `fd` onto the same name inside `into`."""
    for name in os.listdir(fd):
        source = f"/proc/self/fd/{fd}/{name}"
        target = os.path.join(into, name)
        mode = os.lstat(source).st_mode
        if stat.S_ISLNK(mode):
            os.symlink(os.readlink(source), target)
            continue
        if stat.S_ISDIR(mode):
            os.mkdir(target)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        mountutil.mount(source, target, None, mountutil.MS_BIND | mountutil.MS_REC)
        if read_only:
            flags = mountutil.MS_BIND | mountutil.MS_REMOUNT | mountutil.MS_RDONLY
            mountutil.mount(None, target, None, flags)


def _shadow(directory: str, on: str, read_only: bool = False) -> None:
    """Mount a tmpfs on `on` that shows what `directory` holds (bound back) and can take new entries."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        mountutil.mount("tmpfs", on, "tmpfs", SHADOW_FLAGS, f"mode={mode:o}")
        _populate(fd, on, read_only)
    finally:
        os.close(fd)


@dataclass
class _Progress:
    """What the child has made so far: the new root (a shadow of `/`), the directories that are its own
    (shadow tmpfs roots and directories made in them: new entries may go there, but not into the host
    directories bound back below them), and each volume bound so far with whether it is the pod's own
    (an emptyDir: mount points may be made anywhere inside it, unless a deeper bind is not the pod's)."""

    staging: str
    read_only_root: bool = False
    root: str = ""
    fresh: set[str] = dataclass_field(default_factory=set)
    bound: dict[str, bool] = dataclass_field(default_factory=dict)

    def may_create_in(self, directory: str) -> bool:
        if directory in self.fresh:
            return True
        covering = [target for target in self.bound if _inside(directory, target)]
        return bool(covering) and self.bound[max(covering, key=len)]

    def bind_done(self, mount: BindMount) -> None:
        # What was made below this mountPath is hidden by the bind now.
        self.fresh = {d for d in self.fresh if not _inside(d, mount.target)}
        self.bound[mount.target] = mount.owned and mount.is_dir and not mount.read_only


def _make_target(mount: BindMount, done: _Progress) -> None:
    """The mount point of `mount` (under the new root, if any); made inside the namespace if missing."""
    target = mount.target
    if os.path.lexists(done.root + target):
        is_dir = os.path.isdir(done.root + target)
        if is_dir != mount.is_dir:
            kinds = ("a directory", "a file") if is_dir else ("a file", "a directory")
            raise MountPlanError(f"mountPath {target} is {kinds[0]} but the volume source is {kinds[1]}")
        return
    parent = _nearest_existing(target, done.root)
    if not os.path.isdir(done.root + parent):
        raise MountPlanError(f"mountPath {target}: {parent} is not a directory")
    if not done.may_create_in(parent):
        if parent == "/":
            _shadow("/", done.staging, done.read_only_root)
            done.root = done.staging
        else:
            _shadow(done.root + parent, done.root + parent)
        done.fresh.add(parent)
    missing = []
    directory = os.path.dirname(target)
    while directory != parent:
        missing.append(directory)
        directory = os.path.dirname(directory)
    for directory in reversed(missing):
        os.mkdir(done.root + directory, 0o755)
        done.fresh.add(directory)
    if mount.is_dir:
        os.mkdir(done.root + target, 0o755)
    else:
        os.close(os.open(done.root + target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))


def _bind(mount: BindMount, root: str, source: str) -> None:
    target = root + mount.target
    mountutil.mount(source, target, None, mountutil.MS_BIND | mountutil.MS_REC)
    if mount.read_only:
        flags = mountutil.MS_BIND | mountutil.MS_REMOUNT | mountutil.MS_RDONLY
        mountutil.mount(None, target, None, flags)


def enter_container_namespace(plan: NamespacePlan) -> None:
    """The child's mount namespace (see the module's docstring); raises on any failure."""
    mountutil.unshare(mountutil.CLONE_NEWNS)
    mountutil.mount(None, "/", None, mountutil.MS_REC | mountutil.MS_PRIVATE)
    done = _Progress(plan.staging, plan.read_only_root)
    # Each source is held open (O_PATH) before /dev is replaced, so a volume of the host's /dev (a hostPath)
    # binds the host's, as runc resolves a bind's source outside the container; the device cgroup then
    # decides what may be opened through it.
    sources = [os.open(m.source, os.O_PATH | os.O_CLOEXEC) for m in plan.mounts]
    if plan.dev is not None:
        setup_dev(plan.dev)
        if not plan.dev.privileged:
            done.fresh.add("/dev")  # a tmpfs of the container's own: mount points may be made in it
    own_dev = plan.dev is not None and not plan.dev.privileged
    for mount, fd in zip(plan.mounts, sources, strict=True):
        _make_target(mount, done)
        _bind(mount, done.root, f"/proc/self/fd/{fd}")
        if own_dev and os.path.normpath(mount.source) == "/dev":
            # The recursive bind copied the container's /dev too, stacked on the host's /dev it covers: off.
            mountutil.umount(done.root + mount.target, mountutil.MNT_DETACH)
        done.bind_done(mount)
    for fd in sources:
        os.close(fd)
    if done.root:
        os.chdir(done.root)
        mountutil.mount(done.root, "/", None, mountutil.MS_MOVE)
        os.chroot(".")
    try:
        os.chdir(plan.working_dir or "/")
    except OSError as exc:
        raise MountPlanError(f"workingDir {plan.working_dir!r}: {exc.strerror}") from None


def report_and_raise(plan: NamespacePlan, exc: BaseException) -> None:
    """Send the reason of a failed setup to the agent (through the plan's pipe), then fail the child."""
    if plan.error_fd >= 0:
        text = str(exc) if isinstance(exc, MountPlanError) else f"setting up the container's mounts: {exc}"
        os.write(plan.error_fd, text.encode(errors="replace")[:4000])
    raise exc
