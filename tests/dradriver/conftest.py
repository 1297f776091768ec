"""Fixtures: a fake sysfs (8 CPUs, 2 NUMA nodes, SMT pairs) and short socket directories, all removed."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# node0: CPUs 0-3, node1: CPUs 4-7; siblings (0,2) (1,3) (4,6) (5,7); socket = NUMA node.
SIBLINGS = {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3", 4: "4,6", 5: "5,7", 6: "4,6", 7: "5,7"}


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> Path:
    root = tmp_path / "sys"
    cpu_dir = root / "devices/system/cpu"
    for cpu, siblings in SIBLINGS.items():
        (cpu_dir / f"cpu{cpu}/topology").mkdir(parents=True)
        (cpu_dir / f"cpu{cpu}/topology/thread_siblings_list").write_text(siblings + "\n")
        (cpu_dir / f"cpu{cpu}/topology/physical_package_id").write_text(f"{cpu // 4}\n")
    (cpu_dir / "online").write_text("0-7\n")
    for node, cpus in ((0, "0-3"), (1, "4-7")):
        (root / f"devices/system/node/node{node}").mkdir(parents=True)
        (root / f"devices/system/node/node{node}/cpulist").write_text(cpus + "\n")
    return root


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """Unix socket paths must stay under 108 bytes: pytest's tmp_path is too deep."""
    path = Path(tempfile.mkdtemp(prefix="kn-dra-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
