"""Fixtures for the volume manager's tests: the agent tests' cgroup root and harness, and a fake
ConfigMap/Secret store that stands in for the API server (tests/agent_cluster has the real one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent.conftest import cgroup_root, make_harness, manifests, short_dir
from tests.agent.support import swept_cgroup_root
from tests.volumes.support import FakeObjects

__all__ = ["cgroup_root", "make_harness", "manifests", "short_dir"]


@pytest.fixture
def objects() -> FakeObjects:
    return FakeObjects()


@pytest.fixture
def volume_cgroup_root() -> Iterator[str]:
    yield from swept_cgroup_root("kn-volumes")
