"""The busybox and sandbox (pause) images for containerd 2, built here (no registry) and imported with
containerd 2's own `ctr` (.k8s/bin/ctr, never Debian's on PATH): harness/ociimage.py writes the OCI archive,
`ctr -n k8s.io images import --snapshotter overlayfs` (the CRI plugin's namespace and snapshotter) imports it.
Pods name them with `imagePullPolicy: Never`."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from harness.k8s.binaries import binary
from harness.ociimage import BUSYBOX_IMAGE, PAUSE_IMAGE, busybox_archive

__all__ = ["BUSYBOX_IMAGE", "PAUSE_IMAGE", "import_image"]


def import_image(socket: str, name: str, cmd: list[str] | None = None) -> None:
    """Build the busybox image `name` and import it into the containerd 2 at `socket` (a path)."""
    with tempfile.TemporaryDirectory(prefix="kubenode-image-") as tmp:
        archive = busybox_archive(Path(tmp) / "image.tar", name, cmd)
        done = subprocess.run(
            [
                str(binary("ctr")),
                "--address",
                socket,
                "-n",
                "k8s.io",
                "images",
                "import",
                "--snapshotter",
                "overlayfs",
                str(archive),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ctr images import {name}: {done.stderr.strip() or done.stdout.strip()}")
