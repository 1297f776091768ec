"""The image, built once per session exactly as `make image` builds it (tools/image.py: the cached Debian
base, host-built wheels, `podman build`), under a tag of its own that is removed at the end.

Podman, mmdebstrap and runc come from `make podman-deps`; when missing the tests FAIL saying so (never skip).
The base rootfs is cached under /var/cache/kubenode-test (KUBENODE_CACHE), keyed on its packages, so only
the first run on a machine pays for mmdebstrap; podman's own layer cache keeps the base imported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tools.image import ULIMITS, Podman, build


@dataclass(frozen=True)
class Image:
    tag: str
    podman: Podman
    build_seconds: float
    size_bytes: int

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`podman run --rm` with this machine's flags; `args`: run's options, the image, the command."""
        return subprocess.run(self.run_command(*args), capture_output=True, text=True, timeout=timeout)

    def run_command(self, *args: str) -> list[str]:
        return self.podman.command("run", "--rm", *ULIMITS, *args)


def check_installed() -> None:
    missing = [name for name in ("podman", "mmdebstrap", "runc") if shutil.which(name) is None]
    if missing:
        pytest.fail(
            f"the image tests need {', '.join(missing)}: run `make podman-deps` as root", pytrace=False
        )
    if os.geteuid() != 0:
        pytest.fail("the image tests need root (podman, cgroups)", pytrace=False)


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    check_installed()
    podman = Podman()
    tag = f"localhost/kubenode-imagetest:{uuid.uuid4().hex[:8]}"
    seconds, size = build(podman, tag=tag)
    print(f"\nimage {tag}: built in {seconds:.0f} s, {size / 1e6:.0f} MB")
    try:
        yield Image(tag, podman, seconds, size)
    finally:
        podman.run("rmi", "--force", tag, check=False)
