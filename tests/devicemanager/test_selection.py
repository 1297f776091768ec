"""Device choice and option merging as pure functions."""

from __future__ import annotations

import pytest

from agent.cm.devicemanager import AllocationError, Device
from agent.cm.devicemanager.runoptions import merge_responses
from agent.cm.devicemanager.selection import select_devices
from agent.container.resources import Mount
from kubenode.api.deviceplugin.v1beta1 import api_pb2

FREE = [Device("a", True, frozenset({0})), Device("b", True, frozenset({1})), Device("c", True, frozenset())]


def test_without_hint_or_topology_devices_come_in_advertised_order() -> None:
    assert select_devices("r", FREE, 2, None, None) == ["a", "b"]


def test_aligned_then_unaligned_then_no_affinity() -> None:
    asked: list[tuple[list[str], list[str], int]] = []

    def ask(available: list[str], must: list[str], size: int) -> list[str]:
        asked.append((available, must, size))
        return []

    assert select_devices("r", FREE, 3, frozenset({1}), ask) == ["b", "a", "c"]
    assert asked == [(["b", "a", "c"], ["b"], 3)]


def test_too_few_free_devices_is_an_error_with_counts() -> None:
    with pytest.raises(AllocationError, match=r"Requested: 4, Available: 3"):
        select_devices("r", FREE, 4, None, None)


def test_merge_keeps_the_first_value_and_deduplicates_cdi() -> None:
    first = api_pb2.ContainerAllocateResponse(
        envs={"A": "1"},
        mounts=[api_pb2.Mount(container_path="/m", host_path="/x")],
        cdi_devices=[{"name": "v/c=1"}],
    )
    second = api_pb2.ContainerAllocateResponse(
        envs={"A": "2", "B": "3"},
        mounts=[api_pb2.Mount(container_path="/m", host_path="/y")],
        cdi_devices=[{"name": "v/c=1"}, {"name": "v/c=2"}],
    )
    merged = merge_responses([("r1", first), ("r2", second)])
    assert merged.envs == {"A": "1", "B": "3"}
    assert merged.mounts == [Mount("/m", "/x", False)]
    assert merged.cdi_devices == ["v/c=1", "v/c=2"]
