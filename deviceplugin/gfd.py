"""GPU Feature Discovery's node labels, written as a Node Feature Discovery local-source feature file.

Flow: `GpuBackend.start` (with `featuresFile`) calls `gpu_labels` with NVML's attributes of the GPUs,
the driver and CUDA versions and the sharing settings, then `write_features_file`. The file holds one
`nvidia.com/<name>=<value>` line per label, the format and directory of NFD's local source
(/etc/kubernetes/node-feature-discovery/features.d/), so NFD publishes them under a real kubelet and
our agent's node labeller applies them on a kubenode node. Names and value formats are GFD's
(internal/lm); the first GPU speaks for the node, as GFD does for a node of one model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from deviceplugin.backends.nvml import GpuAttributes
from kubenode.atomicfile import write_atomically

PREFIX = "nvidia.com/"
_LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9_.-]")
MAX_LABEL_VALUE = 63


def architecture_family(major: int, minor: int) -> str:
    """GFD's gpu.family from the compute capability."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ada-lovelace" if minor == 9 else "ampere"
    families = {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper"}
    families |= {10: "blackwell", 12: "blackwell", 13: "rubin"}
    return families.get(major, "undefined")


def label_value(text: str) -> str:
    """A valid label value: spaces become `-` (GFD's product rule), other odd characters `_`, trimmed."""
    value = _LABEL_VALUE_BAD.sub("_", text.strip().replace(" ", "-"))[:MAX_LABEL_VALUE]
    return value.strip("-_.")


def gpu_labels(
    gpus: Sequence[GpuAttributes],
    *,
    driver_version: str,
    cuda_driver_version: int,
    sharing: str = "none",
    replicas: int = 1,
    machine: str = "",
    timestamp: int,
) -> dict[str, str]:
    """The labels GFD writes for a node with these GPUs (none when there are none)."""
    if not gpus:
        return {}
    first = gpus[0]
    product = label_value(first.name)
    if sharing != "none":
        product += "-SHARED"  # GFD marks the product of a shared GPU, so selectors don't mistake it
    labels = {
        "gpu.product": product,
        "gpu.memory": str(first.memory_mib),
        "gpu.count": str(len(gpus)),
        "gpu.replicas": str(replicas),
        "gpu.sharing-strategy": sharing,
        "gpu.family": architecture_family(first.compute_major, first.compute_minor),
        "gpu.compute.major": str(first.compute_major),
        "gpu.compute.minor": str(first.compute_minor),
        "gpu.mode": "display" if first.display_active else "compute",
        "mig.capable": str(any(g.mig_capable for g in gpus)).lower(),
        "mps.capable": str(sharing == "mps").lower(),
        "gfd.timestamp": str(timestamp),
    }
    if machine:
        labels["gpu.machine"] = label_value(machine)
    parts = driver_version.split(".")
    labels["cuda.driver-version.full"] = driver_version
    labels["cuda.driver-version.major"] = parts[0]
    labels["cuda.driver-version.minor"] = parts[1] if len(parts) > 1 else "0"
    labels["cuda.driver-version.revision"] = parts[2] if len(parts) > 2 else "0"
    major, minor = cuda_driver_version // 1000, cuda_driver_version % 1000 // 10
    labels["cuda.runtime-version.major"] = str(major)
    labels["cuda.runtime-version.minor"] = str(minor)
    labels["cuda.runtime-version.full"] = f"{major}.{minor}"
    return {PREFIX + name: value for name, value in sorted(labels.items())}


def read_machine_type(sysfs_root: str) -> str:
    """The machine's product name as GFD reads it (DMI), or "" where there is none."""
    try:
        return Path(sysfs_root, "class/dmi/id/product_name").read_text().strip()
    except OSError:
        return ""


def write_features_file(path: Path, labels: Mapping[str, str]) -> None:
    """NFD local-source format: `name=value` per line; replaced atomically, removed when empty."""
    if not labels:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "# GPU Feature Discovery labels, written by kubenode deviceplugin\n"
    body += "".join(f"{name}={value}\n" for name, value in labels.items())
    write_atomically(path, body.encode())
    path.chmod(0o644)
