"""CDI for a container whose runtime does not apply it: its CDI device names turned into plain resources.

Flow: the device plugins' Allocate may answer CDI names (`vendor/class=name`, ContainerResources.cdi_devices).
A CRI runtime that applies CDI itself (containerd 1.7 with enable_cdi, 2.x, CRI-O) gets the names in CRI's
CDIDevices and nothing is read here (agent/kuberuntime/cri/cdisupport.py decides). For one that does not
(Debian's containerd 1.6) and for process pods, the runtime calls `CdiDevices.apply(resources)` as it creates
the container: the spec directories are read (kubenode.cdi, at each call: a plugin may have written its spec
the moment before Allocate answered), the names resolved into merged container edits, and those become
ContainerResources additions:
  env          after the plugins' env, a CDI entry of the same name replacing theirs (containerd injects CDI
               after the spec's env from the plugins is built); the pod spec's own env still wins over both;
  mounts       read-only when the options hold `ro`;
  cdi_edits    the whole resolved edits: its device nodes are the container's beside the plugins' `devices`
               (a CDI node at a plugin device's path replacing it): the CRI config makes each a CRI device
               (host node, container path, cgroup access), the process runtime a node in the container's
               /dev with its type, numbers and mode (agent/kuberuntime/devfs.py `node_from_cdi`) and a
               device cgroup rule; and its hooks and additional GIDs, which only our own runtime can apply.
`cdi_devices` is emptied: the names are spent, so no runtime is asked to resolve them twice.
An unknown name, or one whose spec did not parse, raises CdiResolutionError with one line naming the device
and the spec file's error: the container fails with CreateContainerError and nothing is created on the host
(this runs before the runtime is called). Other specs' devices stay usable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from agent.container.resources import ContainerResources, Mount
from kubenode.cdi.edits import ContainerEdits
from kubenode.cdi.registry import SPEC_DIRS, UnresolvedDevices, load_registry


class CdiResolutionError(LookupError):
    """A container's CDI devices cannot be resolved: one line naming the devices and the spec errors."""


class CdiDevices:
    def __init__(self, spec_dirs: Sequence[Path] = SPEC_DIRS) -> None:
        self.spec_dirs = tuple(spec_dirs)

    def resolve(self, names: Sequence[str]) -> ContainerEdits:
        """The merged edits of `names`, as a runtime applies them; CdiResolutionError when one is unknown."""
        try:
            return load_registry(self.spec_dirs).resolve(names).applied()
        except UnresolvedDevices as exc:
            raise CdiResolutionError(str(exc)) from None

    def apply(self, resources: ContainerResources) -> ContainerResources:
        """`resources` with its CDI devices' edits applied (see the module's docstring)."""
        if not resources.cdi_devices:
            return resources
        return with_edits(resources, self.resolve(resources.cdi_devices))


def with_edits(resources: ContainerResources, edits: ContainerEdits) -> ContainerResources:
    """The edits as plain resources: env and mounts added, the edits kept, the names spent."""
    envs = dict(resources.envs)
    for entry in edits.env:
        name, _, value = entry.partition("=")
        envs[name] = value
    mounts = {m.container_path: m for m in resources.mounts}
    for mount in edits.mounts:
        mounts[mount.container_path] = Mount(mount.container_path, mount.host_path, "ro" in mount.options)
    return replace(
        resources,
        envs=envs,
        mounts=list(mounts.values()),
        cdi_devices=[],
        cdi_edits=edits,
    )
