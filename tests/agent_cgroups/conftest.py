"""Fixtures for the cgroup layer's tests on this machine's real cgroup v1 hierarchy.

Every test gets a unique cgroup root (/kn-test-<random>); teardown kills whatever is left in it
and removes it from every hierarchy, then fails the test if anything survived.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.cm.cgroups.manager import PodCgroupManager, build_manager
from kubenode.cgroupsweep import sweep_v1_root
from tests.agent_cgroups.support import MOUNT, require_root_and_v1


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    require_root_and_v1()
    root = f"/kn-test-{uuid.uuid4().hex[:10]}"
    yield root
    # Give killed tasks a moment to leave before the final check.
    leftovers = sweep_v1_root(root)
    if leftovers:
        leftovers = sweep_v1_root(root)
    assert not leftovers, f"cgroups leaked: {leftovers}"


@pytest.fixture
def make_manager(cgroup_root: str) -> Iterator[Callable[..., PodCgroupManager]]:
    made: list[PodCgroupManager] = []

    def make(driver: str = "cgroupfs", **options: Any) -> PodCgroupManager:
        options.setdefault("pids_limit", -1)
        options.setdefault("enforce_cpu_limits", True)
        manager = build_manager(cgroup_root, driver, mount_root=MOUNT, version=1, **options)  # type: ignore[arg-type]
        assert isinstance(manager, PodCgroupManager)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        for uid in manager.list_pods():
            manager.destroy(uid)
        manager.stop_and_remove_root()


@pytest.fixture
def manager(make_manager: Callable[..., PodCgroupManager]) -> PodCgroupManager:
    pods = make_manager()
    pods.start({"cpu": 2000, "memory": 16 << 30})
    return pods
