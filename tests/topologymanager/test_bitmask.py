"""kube's topologymanager/bitmask/bitmask_test.go, table by table."""

from __future__ import annotations

import pytest

from agent.cm.topologymanager.bitmask import BitMask, BitMaskError, and_all, iterate_bitmasks, or_all


def test_new_empty_bitmask() -> None:
    assert str(BitMask()) == "00"


@pytest.mark.parametrize(
    ("bits", "expected"),
    [((0,), "01"), ((1,), "10"), ((0, 1), "11")],
    ids=["bit 0 set", "bit 1 set", "bit 0 and bit 1 set"],
)
def test_new_bitmask(bits: tuple[int, ...], expected: str) -> None:
    assert str(BitMask.of(*bits)) == expected


@pytest.mark.parametrize(
    ("bits", "expected"),
    [((0,), "01"), ((1,), "10"), ((0, 1), "11"), ((-1, 64), "00")],
    ids=["bit 0", "bit 1", "bits 0 and 1", "bits outside range 0-63"],
)
def test_add(bits: tuple[int, ...], expected: str) -> None:
    assert str(BitMask().add(*bits)) == expected


def test_new_bitmask_refuses_a_bit_outside_the_range() -> None:
    with pytest.raises(BitMaskError, match="bit number must be in range 0-63"):
        BitMask.of(64)


@pytest.mark.parametrize(
    ("bits_set", "bits_remove", "expected"),
    [((0,), (0,), "00"), ((0, 1), (1,), "01"), ((0, 1), (0, 1), "00"), ((0,), (-1, 64), "01")],
    ids=["set 0 remove 0", "set 0,1 remove 1", "set 0,1 remove 0,1", "remove outside range 0-63"],
)
def test_remove(bits_set: tuple[int, ...], bits_remove: tuple[int, ...], expected: str) -> None:
    assert str(BitMask.of(*bits_set).remove(*bits_remove)) == expected


@pytest.mark.parametrize(
    ("masks", "expected"),
    [
        ([(0, 1), (0, 1)], "11"),
        ([(0, 1), (1,)], "10"),
        ([(0,), (0, 1)], "01"),
        ([(0, 1), (0, 1), (1,)], "10"),
        ([(0,), (0,), (1,), (0, 1)], "00"),
        ([(0, 1, 2, 3), (1, 2, 3), (2, 3), (3,)], "1000"),
    ],
)
def test_and(masks: list[tuple[int, ...]], expected: str) -> None:
    bitmasks = [BitMask.of(*m) for m in masks]
    assert str(and_all(bitmasks[0], *bitmasks)) == expected


@pytest.mark.parametrize(
    ("masks", "expected"),
    [
        ([(0,), ()], "01"),
        ([(1,), (1,)], "10"),
        ([(0,), (1,)], "11"),
        ([(0, 1), (0, 1)], "11"),
        ([(0,), (1,), (0, 1)], "11"),
        ([(3,), (2,), (1,), (0,)], "1111"),
    ],
)
def test_or(masks: list[tuple[int, ...]], expected: str) -> None:
    bitmasks = [BitMask.of(*m) for m in masks]
    assert str(or_all(bitmasks[0], *bitmasks)) == expected


@pytest.mark.parametrize("bits", [(0,), (1,), (0, 1)])
def test_clear(bits: tuple[int, ...]) -> None:
    # kube's Clear resets a mask in place; an immutable mask is replaced by the empty one.
    assert str(BitMask.of(*bits).remove(*range(64))) == "00"


@pytest.mark.parametrize("bits", [(), (0,), (0, 1)])
def test_fill(bits: tuple[int, ...]) -> None:
    assert str(BitMask.of(*bits).or_(BitMask.filled())) == "1" * 64


@pytest.mark.parametrize(("bits", "expected"), [((), True), ((0,), False), ((0, 1), False)])
def test_is_empty(bits: tuple[int, ...], expected: bool) -> None:
    assert BitMask.of(*bits).is_empty() is expected


@pytest.mark.parametrize(
    ("bits", "check", "expected"),
    [((), 0, False), ((0,), 0, True), ((0, 1), 1, True), ((0, 1), 64, False)],
)
def test_is_set(bits: tuple[int, ...], check: int, expected: bool) -> None:
    assert BitMask.of(*bits).is_set(check) is expected


@pytest.mark.parametrize(
    ("bits", "check", "expected"),
    [
        ((), (0, 1), False),
        ((0,), (0, 1), True),
        ((0, 1), (0, 1), True),
        ((0, 1), (64, 65), False),
        ((1, 2), (0, 3), False),
    ],
)
def test_any_set(bits: tuple[int, ...], check: tuple[int, ...], expected: bool) -> None:
    assert BitMask.of(*bits).any_set(check) is expected


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [((), (), True), ((), (0,), False), ((0,), (0,), True), ((0,), (1,), False), ((0, 1), (0, 1), True)],
)
def test_is_equal(first: tuple[int, ...], second: tuple[int, ...], expected: bool) -> None:
    assert BitMask.of(*first).is_equal(BitMask.of(*second)) is expected


@pytest.mark.parametrize(("bits", "expected"), [((), 0), ((0,), 1), ((0, 1), 2)])
def test_count(bits: tuple[int, ...], expected: int) -> None:
    assert BitMask.of(*bits).count() == expected


@pytest.mark.parametrize(("bits", "expected"), [((), []), ((0,), [0]), ((0, 1), [0, 1])])
def test_get_bits(bits: tuple[int, ...], expected: list[int]) -> None:
    assert BitMask.of(*bits).bits() == expected


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [((0,), (0, 1), True), ((0, 1), (0,), False), ((0,), (1,), True), ((1,), (0,), False)],
    ids=["unequal bits 1/2", "unequal bits 2/2", "equal bits 1/2", "equal bits 2/2"],
)
def test_is_narrower_than(first: tuple[int, ...], second: tuple[int, ...], expected: bool) -> None:
    assert BitMask.of(*first).is_narrower_than(BitMask.of(*second)) is expected


@pytest.mark.parametrize(
    ("first", "second", "less", "greater"),
    [
        ((0,), (1,), True, False),
        ((1,), (0,), False, True),
        ((0, 3), (0, 2), False, True),
        ((1,), (1,), False, False),
    ],
)
def test_is_less_and_greater_than(
    first: tuple[int, ...], second: tuple[int, ...], less: bool, greater: bool
) -> None:
    assert BitMask.of(*first).is_less_than(BitMask.of(*second)) is less
    assert BitMask.of(*first).is_greater_than(BitMask.of(*second)) is greater


@pytest.mark.parametrize("numbits", [1, 2, 4, 8, 16])
def test_iterate_bitmasks(numbits: int) -> None:
    seen: list[BitMask] = []
    iterate_bitmasks(list(range(numbits)), seen.append)
    # One mask per integer between 1 and 2^n - 1.
    assert len(seen) == (1 << numbits) - 1
    assert len({m.value for m in seen}) == len(seen)
