"""A tiny OCI image made here (nothing can be pulled): a busybox-static rootfs, written as an OCI archive.

`busybox_archive(path, name)` writes one layer (`/bin/busybox` from Debian's busybox-static plus the applet
links a shell and the tests use), an image config and an OCI index naming the image
(`io.containerd.image.name`), which `ctr images import` turns into a named image. `import_image` runs that
import into containerd's `k8s.io` namespace (the CRI plugin's) with the overlayfs snapshotter the CRI plugin
uses. The same image serves as the sandbox (pause) image: its command sleeps forever.

`python -m harness.ociimage --address SOCK NAME...` builds and imports (the Makefile's example-image target).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "echo", "sleep", "cat", "ls", "true", "false", "grep", "env", "ps", "id", "hostname", "wc")
PAUSE_IMAGE = "registry.k8s.io/pause:kubenode"
BUSYBOX_IMAGE = "docker.io/library/busybox:kubenode"
SLEEP_FOREVER = ["/bin/sleep", "2147483647"]


def ctr_import_args(address: str) -> list[str]:
    return ["ctr", "--address", address, "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs"]


def _layer() -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("bin", "tmp", "etc", "proc", "sys", "dev"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        tar.add(str(BUSYBOX), arcname="bin/busybox")
        for applet in APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
    return data.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{digest}"


def _add_json(tar: tarfile.TarFile, name: str, value: Any) -> None:
    data = json.dumps(value).encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def busybox_archive(path: Path, name: str, cmd: list[str] | None = None, user: str = "") -> Path:
    """Write an OCI archive of the busybox image `name` (a full reference) to `path`; `user` is the image
    config's User (none: the image runs as root)."""
    if not BUSYBOX.exists():
        raise FileNotFoundError(f"{BUSYBOX} is missing: install busybox-static (make containerd-deps)")
    layer = _layer()
    compressed = gzip.compress(layer, mtime=0)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/bin"],
            "Cmd": cmd or SLEEP_FOREVER,
            "WorkingDir": "/",
            **({"User": user} if user else {}),
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    with tarfile.open(path, "w") as tar:
        _add_json(tar, "oci-layout", {"imageLayoutVersion": "1.0.0"})
        config_bytes = json.dumps(config).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _blob(tar, config_bytes),
                "size": len(config_bytes),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": _blob(tar, compressed),
                    "size": len(compressed),
                }
            ],
        }
        manifest_bytes = json.dumps(manifest).encode()
        _add_json(
            tar,
            "index.json",
            {
                "schemaVersion": 2,
                "manifests": [
                    {
                        "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "digest": _blob(tar, manifest_bytes),
                        "size": len(manifest_bytes),
                        "annotations": {"io.containerd.image.name": name},
                    }
                ],
            },
        )
    return path


def import_image(address: str, name: str, cmd: list[str] | None = None, user: str = "") -> None:
    """Build the busybox image `name` (with the image config's User `user`) and import it into containerd at
    `address` (a socket path)."""
    with tempfile.TemporaryDirectory(prefix="kubenode-image-") as tmp:
        archive = busybox_archive(Path(tmp) / "image.tar", name, cmd, user)
        done = subprocess.run(
            [*ctr_import_args(address), str(archive)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ctr images import {name}: {done.stderr.strip() or done.stdout.strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True, help="containerd's socket path")
    parser.add_argument("names", nargs="+", help="image references to create")
    args = parser.parse_args(argv)
    for name in args.names:
        import_image(args.address, name)
        print(f"imported {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
