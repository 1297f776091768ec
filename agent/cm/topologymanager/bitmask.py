"""NUMA node masks, as the kubelet's topologymanager/bitmask: 64 bits, immutable here.

A mask is a set of NUMA node ids (0-63). "Narrower" means fewer bits set; between masks with
as many bits, the one that is smaller as an integer (more lower-numbered nodes) wins. Operations
return new masks instead of changing one in place, so hints can share them safely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

MAX_BITS = 64
_ALL = (1 << MAX_BITS) - 1


class BitMaskError(ValueError):
    pass


def _bit(index: int) -> int:
    if index < 0 or index >= MAX_BITS:
        raise BitMaskError("bit number must be in range 0-63")
    return 1 << index


@dataclass(frozen=True, order=False)
class BitMask:
    value: int = 0

    @staticmethod
    def of(*bits: int) -> BitMask:
        """A mask with these bits set; BitMaskError for a bit outside 0-63 (kube's NewBitMask)."""
        value = 0
        for index in bits:
            value |= _bit(index)
        return BitMask(value)

    @staticmethod
    def filled() -> BitMask:
        return BitMask(_ALL)

    def add(self, *bits: int) -> BitMask:
        """This mask with the bits set; bits outside 0-63 leave it unchanged (kube's Add returns an error)."""
        try:
            return BitMask(self.value | BitMask.of(*bits).value)
        except BitMaskError:
            return self

    def remove(self, *bits: int) -> BitMask:
        try:
            return BitMask(self.value & ~BitMask.of(*bits).value)
        except BitMaskError:
            return self

    def and_(self, *masks: BitMask) -> BitMask:
        value = self.value
        for mask in masks:
            value &= mask.value
        return BitMask(value)

    def or_(self, *masks: BitMask) -> BitMask:
        value = self.value
        for mask in masks:
            value |= mask.value
        return BitMask(value)

    def is_empty(self) -> bool:
        return self.value == 0

    def is_set(self, bit: int) -> bool:
        return 0 <= bit < MAX_BITS and bool(self.value >> bit & 1)

    def any_set(self, bits: Iterable[int]) -> bool:
        return any(self.is_set(b) for b in bits)

    def is_equal(self, other: BitMask) -> bool:
        return self.value == other.value

    def count(self) -> int:
        return self.value.bit_count()

    def bits(self) -> list[int]:
        return [i for i in range(MAX_BITS) if self.value >> i & 1]

    def is_narrower_than(self, other: BitMask) -> bool:
        """Fewer bits set; with as many, more lower-numbered bits set (the smaller integer)."""
        if self.count() == other.count():
            return self.is_less_than(other)
        return self.count() < other.count()

    def is_less_than(self, other: BitMask) -> bool:
        return self.value < other.value

    def is_greater_than(self, other: BitMask) -> bool:
        return self.value > other.value

    def __str__(self) -> str:
        """Binary, zero-padded in groups of 2 digits as kube's String pads it (4 prints as "100": kube
        widens only past a strictly greater power of 4)."""
        width = next((shift + 2 for shift in range(MAX_BITS - 2, 0, -2) if self.value > 1 << shift), 2)
        return format(self.value, f"0{width}b")

    def __repr__(self) -> str:
        return f"BitMask({self.bits()})"


def and_all(first: BitMask, *masks: BitMask) -> BitMask:
    return first.and_(*masks)


def or_all(first: BitMask, *masks: BitMask) -> BitMask:
    return first.or_(*masks)


def iterate_bitmasks(bits: Sequence[int], callback: Callable[[BitMask], None]) -> None:
    """Every non-empty subset of `bits` as a mask: all singles first, then pairs, and so on (kube's order)."""
    for size in range(1, len(bits) + 1):
        for subset in combinations(bits, size):
            callback(BitMask.of(*subset))
