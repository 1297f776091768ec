"""Fixtures: a unique cgroup root (always swept), short socket dirs, agent harnesses (always stopped).

tests/hostile imports short_dir, manifests and make_harness from here; it names its own cgroup root.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.support import Harness, swept_cgroup_root


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    yield from swept_cgroup_root("kn-agent")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-", dir="/tmp"))
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
