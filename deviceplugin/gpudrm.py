"""A GPU's DRM device nodes for its CDI device, found as `nvidia-ctk cdi generate` finds them.

Flow: `drm_nodes(gpu, sysfs_root, dev_root)`, for one GPU:
1. its PCI address as sysfs names it (NVML's `00000000:3B:00.0` is `0000:3b:00.0`, `GpuInfo.pci_address`);
2. the `card*` and `renderD*` entries of `<sysfs>/bus/pci/devices/<address>/drm/` (the nodes nvidia-drm
   made for this GPU; nvidia-ctk's internal/info/drm), each the node `/dev/dri/<name>` (`/dev/dri/card1`,
   `/dev/dri/renderD128`: the host's numbering, which is not the GPU's index or minor). A name whose node
   is missing under `dev_root` is left out: a runtime fails a container whose spec names a node that is
   not there;
3. the udev links `/dev/dri/by-path/pci-<address>-card` and `-render` on the host that point to one of
   those nodes: each becomes the same node again at the link's path, with the node as host path.
   nvidia-ctk makes these links with its `create-symlinks` hook (`nvidia-cdi-hook`, which must be on the
   host). CDI has no symlink edit, and no hook runs where the agent applies CDI itself (process pods, and
   CRI runtimes without CDI), while every CDI applier makes a device node at any path under /dev. So a
   program opening the by-path name reaches the GPU's node; one that reads the link to learn the card's
   number does not (it finds a node, not a link).

No `drm` directory (nvidia-drm not loaded, or a GPU it does not drive) means no nodes and no error: the GPU
is used through `/dev/nvidia<minor>` alone. MIG devices, IMEX channels and the `nvidia-caps` nodes are not
generated.
"""

from __future__ import annotations

import os
from pathlib import Path

from deviceplugin.backends.nvml import GpuInfo

DRM_PREFIXES = ("card", "renderD")  # primary and render nodes; control nodes left the kernel in 4.x
BY_PATH_KINDS = ("card", "render")  # udev's /dev/dri/by-path/pci-<address>-{card,render}


def drm_nodes(gpu: GpuInfo, sysfs_root: str, dev_root: str) -> list[tuple[str, str]]:
    """The GPU's DRM nodes as (container path, host path): the nodes, then their by-path names."""
    dev = Path(dev_root)
    try:
        entries = sorted(os.listdir(Path(sysfs_root, "bus/pci/devices", gpu.pci_address, "drm")))
    except OSError:  # no such directory: no DRM for this GPU
        return []
    nodes = [
        (f"/dev/dri/{name}", str(dev / "dri" / name))
        for name in entries
        if name.startswith(DRM_PREFIXES) and (dev / "dri" / name).exists()
    ]
    mine = {host for _, host in nodes}
    by_path = []
    for kind in BY_PATH_KINDS:
        link = dev / "dri/by-path" / f"pci-{gpu.pci_address}-{kind}"
        try:
            target = os.readlink(link)
        except OSError:  # no link, or not a link
            continue
        host = os.path.normpath(os.path.join(link.parent, target))
        if host in mine:
            by_path.append((f"/dev/dri/by-path/{link.name}", host))
    return nodes + by_path
