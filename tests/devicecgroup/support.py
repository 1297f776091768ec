"""Helpers for the device cgroup tests: device nodes made for the test, and a child that tries them.

The test device is a character node made with mknod in a temporary directory with the major:minor of
/dev/fuse (10:229), which neither runc's default list nor ours allows; a second node takes
/dev/loop-control's (10:237). Opening either works for root with no device rule in the way, so an
EPERM can only come from the rules under test.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

FUSE = (10, 229)
LOOP_CONTROL = (10, 237)

_TRY_OPEN = """
import json, os, sys
out = {}
for path in sys.argv[1:]:
    try:
        if path.startswith("mknod:"):
            os.mknod(path[6:], 0o600 | 0o020000, os.makedev(10, 229))
        else:
            os.close(os.open(path, os.O_RDWR))
        out[path] = "ok"
    except OSError as exc:
        out[path] = __import__("errno").errorcode[exc.errno]
print(json.dumps(out))
"""


def make_node(directory: Path, name: str, numbers: tuple[int, int]) -> Path:
    path = directory / name
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(*numbers))
    return path


def require_host_node(path: str, numbers: tuple[int, int]) -> None:
    """The test devices must be what the kernel has (a node of an unregistered number opens ENXIO)."""
    try:
        rdev = os.stat(path).st_rdev
    except FileNotFoundError:
        pytest.fail(f"{path} is missing: the device tests use its major:minor {numbers}")
    if (os.major(rdev), os.minor(rdev)) != numbers:
        pytest.fail(f"{path} is {os.major(rdev)}:{os.minor(rdev)} here, not {numbers}")


def try_in_cgroup(procs_file: Path, paths: Sequence[str]) -> dict[str, str]:
    """Start a child placed in the cgroup before it runs anything; it opens each path read-write (or,
    for "mknod:PATH", makes a node there) and reports "ok" or the errno's name for each."""

    def join() -> None:
        fd = os.open(procs_file, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    done = subprocess.run(
        [sys.executable, "-S", "-c", _TRY_OPEN, *paths],
        preexec_fn=join,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result
