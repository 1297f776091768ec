"""The CDI spec for NVIDIA GPUs, as `nvidia-ctk cdi generate` builds it (pkg/nvcdi), kind `nvidia.com/gpu`.

Flow: `GpuBackend.start` (with `cdi: true`) calls `write_gpu_spec`, which
1. lists the loader cache (`ldconfig -p`) and finds the driver's libcuda (or libnvidia-ml) there;
   the libraries of the running driver are the `*.so.<driver version>` files in that directory,
   as nvidia-ctk locates them;
2. builds the common edits: the control nodes that exist (`nvidiactl`, `nvidia-uvm`,
   `nvidia-uvm-tools`, `nvidia-modeset`), each library mounted read-only at its own path and at every
   loader-cache name (soname) that points to it, `nvidia-smi` read-only, and `LD_LIBRARY_PATH` naming
   the library directory, so that an image with no NVIDIA files (no ldconfig, no /etc/ld.so.conf)
   finds them without a hook;
3. one device per GPU named by UUID and by index, holding `/dev/nvidia<minor>` (the minor from NVML,
   not the index) and the GPU's DRM nodes with their `/dev/dri/by-path` names (deviceplugin.gpudrm,
   from sysfs under `sysfs_root`), plus `all` with every GPU's nodes;
4. replaces the file `kubenode-gpu_<resource>.json` in the spec directory atomically.

Paths: host paths are under `driver_root` and `dev_root` (a fake root in tests); container paths are
the paths a driver installed at / has. Not written: GSP firmware, IPC sockets, MIG devices and their
capability nodes, IMEX channels.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deviceplugin.backends.nvml import GpuInfo
from deviceplugin.cdi import CDI_VERSION
from deviceplugin.gpudrm import drm_nodes
from kubenode.atomicfile import write_atomically

CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
ANCHOR_LIBRARIES = ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1")  # where the driver's libraries are
BINARIES = ("nvidia-smi",)
BINARY_DIRS = ("usr/bin", "usr/sbin", "bin", "sbin", "usr/local/bin")
READ_ONLY_BIND = ["ro", "nosuid", "nodev", "rbind", "rprivate"]
LDCONFIG_TIMEOUT_S = 10


class GpuSpecError(RuntimeError):
    """The spec cannot be built (no loader cache, no driver libraries); one line naming what is missing."""


def parse_ldconfig(text: str) -> dict[str, list[str]]:
    """`ldconfig -p` output as soname -> paths (64-bit first as listed). Header and odd lines are skipped."""
    cache: dict[str, list[str]] = {}
    for line in text.splitlines():
        name, arrow, path = line.strip().partition(" => ")
        if not arrow:
            continue
        cache.setdefault(name.split(" (", 1)[0], []).append(path.strip())
    return cache


def list_loader_cache(ldconfig: str) -> str:
    try:
        done = subprocess.run(
            [ldconfig, "-p"], capture_output=True, text=True, timeout=LDCONFIG_TIMEOUT_S, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GpuSpecError(f"cannot list the loader cache with {ldconfig} -p: {exc}") from None
    return done.stdout


@dataclass(frozen=True)
class DriverFiles:
    library_dir: str  # container path
    libraries: tuple[tuple[str, str], ...]  # (host path, container path)
    binaries: tuple[tuple[str, str], ...]


def find_driver_files(cache: dict[str, list[str]], driver_version: str, driver_root: str) -> DriverFiles:
    root = Path(driver_root)
    anchor = next((cache[n][0] for n in ANCHOR_LIBRARIES if cache.get(n)), None)
    if anchor is None:
        wanted = " or ".join(ANCHOR_LIBRARIES)
        raise GpuSpecError(f"no {wanted} in the loader cache: is the driver installed?")
    library_dir = os.path.dirname(anchor)
    host_dir = root / library_dir.lstrip("/")
    versioned = sorted(host_dir.glob(f"*.so.{driver_version}"))
    if not versioned:
        raise GpuSpecError(f"{host_dir}: no libraries of driver {driver_version} (*.so.{driver_version})")
    libraries: list[tuple[str, str]] = []
    for library in versioned:
        container_path = f"{library_dir}/{library.name}"
        libraries.append((str(library), container_path))
        real = library.resolve()
        for paths in cache.values():  # the sonames programs ask for, e.g. libcuda.so.1
            for path in paths:
                host = root / path.lstrip("/")
                if path != container_path and os.path.dirname(path) == library_dir and host.resolve() == real:
                    libraries.append((str(library), path))
    binaries = []
    for binary in BINARIES:
        found = next((root / d / binary for d in BINARY_DIRS if (root / d / binary).is_file()), None)
        if found is not None:
            binaries.append((str(found), "/" + str(found.relative_to(root))))
    return DriverFiles(library_dir, tuple(libraries), tuple(binaries))


def build_gpu_spec(
    kind: str, gpus: Sequence[GpuInfo], files: DriverFiles, dev_root: str, sysfs_root: str
) -> dict[str, Any]:
    dev = Path(dev_root)

    def node(name: str, host: str | None = None) -> dict[str, str]:
        """The node /dev/<name>; its host node is <dev_root>/<name> unless `host` names another."""
        host = host or str(dev / name)
        entry = {"path": f"/dev/{name}"}
        if host != entry["path"]:
            entry["hostPath"] = host
        return entry

    def mount(host: str, container: str) -> dict[str, Any]:
        return {"hostPath": host, "containerPath": container, "options": READ_ONLY_BIND}

    devices = []
    every = []
    for gpu in sorted(gpus, key=lambda g: g.index):
        drm = [node(path.removeprefix("/dev/"), host) for path, host in drm_nodes(gpu, sysfs_root, dev_root)]
        nodes = [node(f"nvidia{gpu.minor}"), *drm]
        edits = {"deviceNodes": nodes}
        devices.append({"name": gpu.uuid, "containerEdits": edits})
        devices.append({"name": str(gpu.index), "containerEdits": edits})
        every += nodes
    devices.append({"name": "all", "containerEdits": {"deviceNodes": every}})
    common = {
        "env": [f"LD_LIBRARY_PATH={files.library_dir}", f"NVIDIA_CTK_LIBCUDA_DIR={files.library_dir}"],
        "deviceNodes": [node(n) for n in CONTROL_NODES if (dev / n).exists()],
        "mounts": [mount(h, c) for h, c in files.libraries + files.binaries],
    }
    return {"cdiVersion": CDI_VERSION, "kind": kind, "devices": devices, "containerEdits": common}


def gpu_spec_file_name(resource_name: str) -> str:
    return "kubenode-gpu_" + resource_name.replace("/", "_") + ".json"


def write_gpu_spec(
    spec_dir: str,
    resource_name: str,
    kind: str,
    gpus: Sequence[GpuInfo],
    driver_version: str,
    *,
    driver_root: str,
    dev_root: str,
    sysfs_root: str,
    loader_cache: str,
) -> Path:
    """Build the spec from `loader_cache` (`ldconfig -p` text) and replace our file; returns its path."""
    files = find_driver_files(parse_ldconfig(loader_cache), driver_version, driver_root)
    spec = build_gpu_spec(kind, gpus, files, dev_root, sysfs_root)
    path = Path(spec_dir) / gpu_spec_file_name(resource_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(spec, indent=2) + "\n").encode())
    os.chmod(path, 0o644)  # runtimes read it as root, but people and tools may not
    return path
