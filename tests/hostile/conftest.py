"""Fixtures for the hostile-input and fault tests: the agent tests' dirs and harnesses
(tests/agent/conftest.py), on a cgroup root of this suite's own name (always swept)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent.conftest import make_harness, manifests, short_dir
from tests.agent.support import swept_cgroup_root

__all__ = ["cgroup_root", "make_harness", "manifests", "short_dir"]


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    yield from swept_cgroup_root("kn-hostile")
