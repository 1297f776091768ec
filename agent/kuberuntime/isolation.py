"""What isolates a process container besides its securityContext: its device rules, its /dev, its mounts.

Flow, per container start, in the agent before anything is forked (runtime.py `_launch`):
1. `container_isolation(resources, privileged)` reads the container's ContainerResources (the device
   plugins' Allocate answers): the device cgroup rules (agent/cm/devicecgroup/rules.py: runc's default
   list without mknod, plus each device spec with exactly its permissions; everything when privileged),
   the plan of its own /dev (devfs.py: the default nodes, each spec's host node at its container_path;
   the host's /dev when privileged) and Allocate's mounts as bind mounts. Every host path is stat'ed here,
   so a device spec whose host path is missing or not a device, a bad permission string or a missing
   mount source raises ContainerConfigError naming it, and nothing has been made on the host yet.
2. `namespace_plan(...)` puts the volumeMounts, Allocate's mounts and the /dev plan together for the
   child (agent/volumemanager/namespace.py builds /dev first, then binds the mounts over it).
3. The runtime then has the container's cgroup made with the rules enforced (the pod cgroup manager's
   `ensure_container`), and the child joins it before it execs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.cm.devicecgroup.rules import DeviceRule, DeviceRuleError, container_rules
from agent.container.downwardapi import ContainerConfigError
from agent.container.resources import ContainerResources, Mount
from agent.container.volumes import MountedVolume
from agent.kuberuntime.devfs import DevfsError, DevPlan, dev_plan, node_for_device, node_from_cdi
from agent.volumemanager.namespace import BindMount, MountPlanError, NamespacePlan, container_mounts
from kubenode.model import Container


@dataclass(frozen=True)
class Isolation:
    rules: tuple[DeviceRule, ...]
    dev: DevPlan
    mounts: tuple[BindMount, ...]  # Allocate's


def container_isolation(resources: ContainerResources, privileged: bool) -> Isolation:
    """Step 1 of the module's flow; ContainerConfigError names the device or path."""
    cdi_nodes = resources.cdi_edits.device_nodes if resources.cdi_edits is not None else ()
    try:
        devices = [(d.host_path, d.permissions) for d in resources.devices]
        devices += [(n.source, n.cgroup_access) for n in cdi_nodes if n.cgroup_access]
        rules = container_rules(devices, privileged)
        nodes = {
            n.path: n for n in (node_for_device(d.host_path, d.container_path) for d in resources.devices)
        }
        nodes.update((n.path, n) for n in map(node_from_cdi, cdi_nodes))  # a CDI node replaces a plugin's
    except (DeviceRuleError, DevfsError) as exc:
        raise ContainerConfigError(str(exc)) from None
    return Isolation(
        rules, dev_plan(list(nodes.values()), privileged), tuple(_allocate_mount(m) for m in resources.mounts)
    )


def _allocate_mount(mount: Mount) -> BindMount:
    host_path, container_path, read_only = mount.host_path, mount.container_path, mount.read_only
    if not container_path.startswith("/") or os.path.normpath(container_path) == "/":
        raise ContainerConfigError(f"device plugin mount {host_path}: container path {container_path!r}")
    try:
        is_dir = stat.S_ISDIR(os.stat(host_path).st_mode)
    except OSError as exc:
        raise ContainerConfigError(f"device plugin mount {host_path}: {exc.strerror}") from None
    return BindMount(host_path, os.path.normpath(container_path), read_only, is_dir)


def namespace_plan(
    container: Container, volumes: Mapping[str, MountedVolume], isolation: Isolation, staging_dir: Path
) -> NamespacePlan:
    """The container's mount namespace: its volumeMounts and Allocate's mounts (a plan that cannot be
    honoured is a CreateContainerConfigError, as the kubelet's failure to prepare a subPath is), over its
    own /dev."""
    try:
        mounts = container_mounts(container, volumes)
    except MountPlanError as exc:
        raise ContainerConfigError(str(exc)) from None
    taken = {m.target for m in mounts}
    for extra in isolation.mounts:
        if extra.target in taken:
            raise ContainerConfigError(f"device plugin mount {extra.source}: {extra.target} is mounted twice")
        taken.add(extra.target)
    every = tuple(sorted((*mounts, *isolation.mounts), key=lambda m: (m.target.count("/"), m.target)))
    staging = ""
    if every:
        # An empty directory of the pod's, where a shadow of / is built if a mountPath needs one.
        staging_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = str(staging_dir)
    return NamespacePlan(every, staging, dev=isolation.dev)
