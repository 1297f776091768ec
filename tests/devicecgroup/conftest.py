"""Fixtures: a fresh devices cgroup (v1) and a fresh cgroup on the unified mount (cgroup v2 device
programs on this hybrid host), each under a unique root that is killed and removed at teardown (a
leak fails the test), and a directory holding the test's device nodes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cm.cgroups.detect import CGROUP2_SUPER_MAGIC, filesystem_magic
from agent.cm.cgroups.sweep import sweep_v1_root, sweep_v2_root
from agent.cm.devicecgroup.v1 import V1_DEVICES_MOUNT
from tests.devicecgroup.support import FUSE, LOOP_CONTROL, make_node, require_host_node

UNIFIED_MOUNT = Path("/sys/fs/cgroup/unified")


def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the device cgroup tests need root (cgroups, mknod)")


@pytest.fixture
def nodes(tmp_path: Path) -> dict[str, Path]:
    """Two character nodes made here: "fuse" (10:229) and "loop" (10:237)."""
    _require_root()
    require_host_node("/dev/fuse", FUSE)
    require_host_node("/dev/loop-control", LOOP_CONTROL)
    return {"fuse": make_node(tmp_path, "fuse", FUSE), "loop": make_node(tmp_path, "loop", LOOP_CONTROL)}


@pytest.fixture
def v1_cgroup() -> Iterator[Path]:
    _require_root()
    if not (V1_DEVICES_MOUNT / "devices.list").is_file():
        pytest.fail(f"the cgroup v1 devices controller is not mounted at {V1_DEVICES_MOUNT}")
    root = f"/kn-test-{uuid.uuid4().hex[:10]}"
    cgroup = V1_DEVICES_MOUNT / root.strip("/") / "c"
    cgroup.mkdir(parents=True)
    yield cgroup
    left = sweep_v1_root(root)
    assert not left, f"cgroups leaked: {left}"


@pytest.fixture
def unified_cgroup() -> Iterator[Path]:
    _require_root()
    if filesystem_magic(UNIFIED_MOUNT) != CGROUP2_SUPER_MAGIC:
        pytest.fail(f"no cgroup2 mount at {UNIFIED_MOUNT}: this host's device programs are tested there")
    root = f"/kn-test-{uuid.uuid4().hex[:10]}"
    cgroup = UNIFIED_MOUNT / root.strip("/") / "c"
    cgroup.mkdir(parents=True)
    yield cgroup
    left = sweep_v2_root(root, mount=UNIFIED_MOUNT)
    assert not left, f"cgroups leaked: {left}"
