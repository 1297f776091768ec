"""Kubernetes quantities as exact integers.

CPU is kept in millicores and every other resource in its base unit (bytes, devices,
pods), both rounded up as resource.Quantity's MilliValue()/Value() do, so arithmetic
on requests is exact integer arithmetic. Parsing uses the official client's
`parse_quantity`; this module adds the field-naming errors and the formatting back.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity as _untyped_parse_quantity

# The client's function is untyped; this is its documented signature.
parse_quantity: Callable[[str], Decimal] = _untyped_parse_quantity

CPU = "cpu"

_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


class QuantityError(ValueError):
    """A value that is not a valid, non-negative Kubernetes quantity."""


def to_decimal(value: object) -> Decimal:
    """Parse a quantity (string or number); raises QuantityError with the offending text."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"quantity must be a string or a number, got {value!r}")
    text = str(value).strip()
    try:
        number = parse_quantity(text)
    except (ValueError, ArithmeticError) as exc:
        raise QuantityError(f"invalid quantity {value!r}: {exc}") from None
    if not number.is_finite():
        raise QuantityError(f"invalid quantity {value!r}")
    if number < 0:
        raise QuantityError(f"must be greater than or equal to 0, got {value!r}")
    return Decimal(number)


def to_amount(resource: str, value: object) -> int:
    """A quantity as this model's integer: millicores for cpu, base units (rounded up) otherwise."""
    number = to_decimal(value)
    if resource == CPU:
        return math.ceil(number * 1000)
    return math.ceil(number)


def format_amount(resource: str, amount: int) -> str:
    """The canonical Kubernetes string for an integer amount of a resource."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount != 0 and (
        resource == "memory" or resource == "ephemeral-storage" or resource.startswith("hugepages-")
    ):
        for suffix, factor in _BINARY_SUFFIXES:
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)
