"""CDI container edits, typed: what a spec (all of it) or one of its devices asks a runtime to do.

`ContainerEdits.merged(other)` concatenates, as the CDI library's Append does; `applied()` gives the
edits as a runtime applies them in order (the library's Apply into an OCI spec): a later env entry of
the same name replaces the earlier one in place, a later device node at the same path replaces the
earlier one and goes last, a later mount at the same containerPath likewise and mounts are ordered by
depth (the parents first, stably), and additional GID 0 is dropped.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace
from typing import Any

HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")
NO_PERMISSIONS = "none"  # a device node whose cgroup rule grants nothing


@dataclass(frozen=True)
class DeviceNode:
    path: str  # in the container
    host_path: str = ""  # "" means the same as path
    type: str = ""  # "", b, c, u (char), p (fifo); "" means: as the host node is
    major: int = 0  # 0 means: as the host node is
    minor: int = 0
    file_mode: int | None = None
    permissions: str = ""  # "" means rwm; "none" means no access
    uid: int | None = None
    gid: int | None = None

    @property
    def source(self) -> str:
        return self.host_path or self.path

    @property
    def cgroup_access(self) -> str:
        """The access its device rule grants (the library's defaults)."""
        if self.permissions == NO_PERMISSIONS:
            return ""
        return self.permissions or "rwm"


@dataclass(frozen=True)
class Mount:
    host_path: str
    container_path: str
    options: tuple[str, ...] = ()
    type: str = ""


@dataclass(frozen=True)
class Hook:
    hook_name: str
    path: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    timeout: int | None = None


@dataclass(frozen=True)
class NetDevice:
    host_interface_name: str
    name: str


@dataclass(frozen=True)
class ContainerEdits:
    env: tuple[str, ...] = ()
    device_nodes: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()
    hooks: tuple[Hook, ...] = ()
    additional_gids: tuple[int, ...] = ()
    net_devices: tuple[NetDevice, ...] = ()
    intel_rdt: dict[str, Any] | None = field(default=None, compare=True, hash=False)

    def is_empty(self) -> bool:
        return self == ContainerEdits()

    def merged(self, other: ContainerEdits) -> ContainerEdits:
        return ContainerEdits(
            env=self.env + other.env,
            device_nodes=self.device_nodes + other.device_nodes,
            mounts=self.mounts + other.mounts,
            hooks=self.hooks + other.hooks,
            additional_gids=self.additional_gids + other.additional_gids,
            net_devices=self.net_devices + other.net_devices,
            intel_rdt=other.intel_rdt if other.intel_rdt is not None else self.intel_rdt,
        )

    def applied(self) -> ContainerEdits:
        """These edits as a runtime ends up with them (see the module's docstring)."""
        env: dict[str, str] = {}
        for entry in self.env:
            env[entry.partition("=")[0]] = entry  # a dict keeps the first place of a key, with the last value
        nodes: dict[str, DeviceNode] = {}
        for node in self.device_nodes:  # removed, then added at the end
            nodes.pop(node.path, None)
            nodes[node.path] = node
        mounts: dict[str, Mount] = {}
        for mount in self.mounts:
            mounts.pop(mount.container_path, None)
            mounts[mount.container_path] = mount
        ordered = sorted(mounts.values(), key=lambda m: posixpath.normpath(m.container_path).count("/"))
        gids = tuple(dict.fromkeys(gid for gid in self.additional_gids if gid != 0))
        return replace(
            self, env=tuple(env.values()), device_nodes=tuple(nodes.values()), mounts=tuple(ordered),
            additional_gids=gids,
        )  # fmt: skip
