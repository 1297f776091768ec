"""A container's own view of the root filesystem, for readOnlyRootFilesystem on a process pod.

A process pod has no image: its root is the host's. `read_only_root` runs in the child between fork and
exec, in the container's own mount namespace (private propagation: nothing it mounts reaches the host, and
the host's later mounts do not reach it), and remounts `/` read-only there alone. Mounts below `/` (the
pod's volumes, /proc, /dev, tmpfs) keep their own modes, as a container's volume mounts do. The host's
view is unchanged.
"""

from __future__ import annotations

from agent.volumemanager.mountutil import (
    CLONE_NEWNS,
    MS_BIND,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    mount,
    unshare,
)


def private_mount_namespace() -> None:
    """Enter a new mount namespace whose mounts propagate nowhere."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def read_only_root() -> None:
    """Remount `/` read-only in the current (private) mount namespace."""
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY)
