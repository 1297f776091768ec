"""kube's numa_info_test.go: NUMAInfo from (fake) sysfs, average distances, Closest."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cm.topologymanager.bitmask import BitMask
from agent.cm.topologymanager.numainfo import (
    NUMAInfo,
    NUMAInfoError,
    average_distance,
    numa_info,
    read_distances,
    split_distances,
    sysfs_nodes,
)

ROWS = {0: "10 11 12 12", 1: "11 10 12 12", 2: "12 12 10 11", 3: "12 12 11 10"}
FOUR = {n: [int(v) for v in r.split()] for n, r in ROWS.items()}


def fake_sysfs(root: Path, rows: dict[int, str]) -> Path:
    for node, row in rows.items():
        directory = root / "devices/system/node" / f"node{node}"
        directory.mkdir(parents=True)
        (directory / "distance").write_text(row + "\n")
    return root


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_numa_info_positive(tmp_path: Path, count: int) -> None:
    root = fake_sysfs(tmp_path, ROWS)
    got = numa_info(list(range(count)), root, need_distances=True)
    assert got.nodes == tuple(range(count))
    assert dict(got.distances) == {n: [int(v) for v in ROWS[n].split()] for n in range(count)}


def test_numa_info_negative_one_node(tmp_path: Path) -> None:
    root = fake_sysfs(tmp_path, ROWS)
    with pytest.raises(NUMAInfoError, match="No such file or directory"):
        numa_info([9], root, need_distances=True)
    # Without prefer-closest-numa-nodes distances are not needed: a missing file is no error.
    assert numa_info([9], root, need_distances=False) == NUMAInfo((9,), {})


def test_sysfs_nodes(tmp_path: Path) -> None:
    root = fake_sysfs(tmp_path, {0: "10 21", 1: "21 10", 10: "10"})
    (root / "devices/system/node/possible").write_text("0-1\n")
    assert sysfs_nodes(root) == [0, 1, 10]
    assert sysfs_nodes(tmp_path / "missing") == [0]


@pytest.mark.parametrize(
    ("name", "bits", "distances", "expected"),
    [
        ("1 NUMA node", (0,), {0: [10]}, 10),
        ("2 NUMA node, 1 set in bitmask", (0,), {0: [10, 11], 1: [11, 10]}, 10),
        ("2 NUMA node, 2 set in bitmask", (0, 1), {0: [10, 11], 1: [11, 10]}, 10.5),
        (
            "4 NUMA node, 2 set in bitmask",
            (0, 2),
            {n: [int(v) for v in r.split()] for n, r in ROWS.items()},
            11,
        ),
        (
            "4 NUMA node, 3 set in bitmask",
            (0, 2, 3),
            FOUR,
            11.11111111111111,
        ),
        ("0 NUMA node, 0 set in bitmask", (), {}, 0),
        # Node 1 only devices report (sysfs has node 0's row alone): the kernel's 10 and 20 stand in.
        ("sysfs 1 NUMA node, a reported node set too", (0, 1), {0: [10]}, 15),
    ],
)
def test_calculate_avg_distance_for(
    name: str, bits: tuple[int, ...], distances: dict[int, list[int]], expected: float
) -> None:
    assert average_distance(distances, BitMask.of(*bits)) == pytest.approx(expected)


def test_get_distances(tmp_path: Path) -> None:
    root = fake_sysfs(tmp_path, {0: "10 11 12 13"})
    assert read_distances(root, 0) == [10, 11, 12, 13]
    with pytest.raises(NUMAInfoError):
        read_distances(root, 99)


@pytest.mark.parametrize(
    ("raw", "expected"), [("10", [10]), ("10 20", [10, 20])], ids=["one distance", "two distances"]
)
def test_split_distances(raw: str, expected: list[int]) -> None:
    assert split_distances(raw) == expected


def test_split_distances_refuses_a_negative_number() -> None:
    with pytest.raises(NUMAInfoError, match="cannot convert"):
        split_distances("10 -20")


SAME = {n: [10, 10, 10, 10] for n in range(4)}


@pytest.mark.parametrize(
    ("name", "current", "candidate", "expected", "distances"),
    [
        ("length differs, current narrower", (0,), (0, 2), "current", {}),
        ("same length and distance, current more lower bits set", (0, 1), (0, 2), "current", SAME),
        ("same length and distance, candidate more lower bits set", (0, 3), (0, 2), "candidate", SAME),
        ("same length, candidate average distance is smaller", (0, 3), (0, 1), "candidate", FOUR),
        ("same length, current average distance is smaller", (2, 3), (0, 3), "current", FOUR),
    ],
)
def test_closest(
    name: str,
    current: tuple[int, ...],
    candidate: tuple[int, ...],
    expected: str,
    distances: dict[int, list[int]],
) -> None:
    numa = NUMAInfo(tuple(distances), distances)
    result = numa.closest(BitMask.of(*candidate), BitMask.of(*current))
    assert result == BitMask.of(*(current if expected == "current" else candidate))
