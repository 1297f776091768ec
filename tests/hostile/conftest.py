"""Fixtures for the hostile-input and fault tests: a unique cgroup root (always swept), dirs, agents."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.support import Harness, require_cgroup_v1, sweep


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    require_cgroup_v1()
    root = f"/kn-hostile-{uuid.uuid4().hex[:10]}"
    yield root
    leftovers = sweep(root)
    assert not leftovers, f"cgroups leaked: {leftovers}"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-h-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    path = tmp_path / "manifests"
    path.mkdir()
    return path


@pytest.fixture
def make_harness(cgroup_root: str, manifests: Path, tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(state_dir: Path | None = None, **options: Any) -> Harness:
        harness = Harness(cgroup_root, manifests, state_dir or tmp_path / "state", **options)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.stop()
