"""`make image`: build the kubenode image with podman from a Debian base made here, no registry needed.

Flow:
1. The base: `mmdebstrap --variant=minbase --include=python3,python3-venv bookworm` from the mirror apt
   already uses, cached as a tar under the cache dir (KUBENODE_CACHE, default /var/cache/kubenode-test),
   keyed on the suite, variant and packages; `podman import` makes it localhost/kubenode-base:<key>.
2. The wheels: kubenode and every dependency, built on the host with its pip (and its index and
   certificates: pip inside a build container sees neither), into the build context.
3. `podman build --build-arg BASE=<the base>`: the Dockerfile installs the wheels with --no-index. A
   registry build runs the same Dockerfile with BASE=python:3.11-slim-bookworm (`make image BASE=...`).
Prints the image's size and the build's time. podman runs with the flags this kind of machine needs
(cgroupfs, file events, the nofile/nproc ulimits); `--root`/`--runroot` pick a private storage.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("KUBENODE_CACHE", "/var/cache/kubenode-test"))
SUITE = "bookworm"
IMAGE_PACKAGES = ("python3", "python3-venv")
ULIMITS = ("--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024")  # runc cannot raise them here


def version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


IMAGE = f"ghcr.io/kubenode/kubenode:{version()}"


class Podman:
    """The podman command line with this machine's flags, on the default or a private storage."""

    def __init__(self, root: Path | None = None, runroot: Path | None = None) -> None:
        self.flags = ["--cgroup-manager=cgroupfs", "--events-backend=file"]
        if root is not None:
            self.flags += [f"--root={root}", f"--runroot={runroot or root / 'run'}", "--storage-driver=vfs"]

    def command(self, *args: str) -> list[str]:
        return ["podman", *self.flags, *args]

    def run(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise SystemExit(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        return result

    def image_exists(self, name: str) -> bool:
        return self.run("image", "exists", name, check=False).returncode == 0


def rootfs_tar(packages: Sequence[str], suite: str = SUITE, variant: str = "minbase") -> Path:
    """A Debian rootfs tar with `packages`, made once per (suite, variant, packages) and cached."""
    key = hashlib.sha256(f"{suite} {variant} {' '.join(sorted(packages))}".encode()).hexdigest()[:12]
    cached = CACHE / f"debian-{suite}-{variant}-{key}.tar"
    if cached.exists():
        return cached
    if shutil.which("mmdebstrap") is None:
        raise SystemExit("mmdebstrap is not installed: run `make podman-deps` as root")
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
    command = ["mmdebstrap", "--format=tar", f"--variant={variant}", f"--include={','.join(packages)}"]
    command += [suite, str(partial)]
    print(f"image: making the base: {' '.join(command)}", flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise SystemExit(f"mmdebstrap failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
    os.replace(partial, cached)
    return cached


def base_image(podman: Podman) -> str:
    tar = rootfs_tar(IMAGE_PACKAGES)
    name = f"localhost/kubenode-base:{tar.stem.removeprefix('debian-')}"
    if not podman.image_exists(name):
        podman.run("import", str(tar), name)
    return name


def build_wheels(context: Path) -> None:
    wheels = context / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    # setuptools builds in ROOT/build and never removes what it copied there: a module deleted or moved
    # since the last build would still go into the wheel. Start from nothing, and leave nothing.
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels), str(ROOT)]
    result = subprocess.run(command, capture_output=True, text=True)
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    if result.returncode != 0:
        raise SystemExit(f"pip wheel failed: {result.stderr.strip()[-2000:]}")


def build(podman: Podman, base: str | None = None, tag: str = IMAGE) -> tuple[float, int]:
    """Builds `tag`; returns (seconds, image size in bytes)."""
    started = time.monotonic()
    base = base or base_image(podman)
    with tempfile.TemporaryDirectory(prefix="kn-image-") as context:
        build_wheels(Path(context))
        podman.run(
            "build",
            *ULIMITS,
            f"--build-arg=BASE={base}",
            f"--file={ROOT / 'Dockerfile'}",
            f"--tag={tag}",
            context,
        )
    podman.run("image", "prune", "--force", "--filter=label=io.kubenode.stage=build", check=False)
    elapsed = time.monotonic() - started
    size = int(podman.run("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())
    return elapsed, size


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--base", help="the base image (default: the Debian base made and cached here)")
    parser.add_argument("--tag", default=IMAGE)
    parser.add_argument("--root", type=Path, help="a private podman storage (default: podman's own)")
    args = parser.parse_args(argv)
    if shutil.which("podman") is None:
        raise SystemExit("podman is not installed: run `make podman-deps` as root")
    elapsed, size = build(Podman(args.root), args.base, args.tag)
    print(f"image: {args.tag} built in {elapsed:.0f} s, {size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
