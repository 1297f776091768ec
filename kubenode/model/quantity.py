"""Kubernetes quantities as exact integers, parsed with bounds before any arithmetic.

CPU is kept in millicores and every other resource in its base unit (bytes, devices,
pods), both rounded up as resource.Quantity's MilliValue()/Value() do (so `1e-999999999`
cpu is 1m), and arithmetic on requests is exact integer arithmetic.

The grammar is resource.Quantity's: a signed decimal number, then a binary SI suffix
(Ki..Ei), a decimal SI suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent
(e/E and a signed integer). Input from the network or a manifest is hostile, so the
text is bounded before it becomes a number: at most `MAX_DIGITS` digits, an exponent
that fits int32 (as resource.ParseQuantity requires), and a value whose scaled amount
fits int64; the magnitude is judged from the digit count and the exponent, so neither
`1e999999999` nor a thousand-digit string is ever expanded. kube-apiserver itself does
not cap a quantity's magnitude, but every consumer reads it through int64 (MilliValue,
Value), so a larger one is refused here, with the error naming the value's limit.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from kubenode.model.errors import INT64_MAX, echo

CPU = "cpu"
INT32_MAX = 2**31 - 1
MAX_DIGITS = 100  # far beyond any real quantity (int64 has 19 digits, nano precision 9 more)

_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_BINARY_POWERS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_POWERS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exp>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))"
)
# Below this many decimal orders a positive value is under 1 (even times 2^60 and 1000): it rounds up to 1.
_TINY_ORDER = -30


class QuantityError(ValueError):
    """A value that is not a valid, non-negative Kubernetes quantity."""


def to_fraction(value: object) -> Fraction:
    """The exact value of a quantity (string or number); raises QuantityError with the (cut) text."""
    if type(value) is str:
        return _string_fraction(value)
    return _to_fraction(value)


@functools.lru_cache(maxsize=4096)
def _string_fraction(text: str) -> Fraction:
    # Objects repeat a handful of quantity strings ("100m", "500Mi"): the scheduler and the API
    # server parse every pod in full, so a bounded cache saves most of that. Errors are not cached.
    return _to_fraction(text)


def _to_fraction(value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"quantity must be a string or a number, got {echo(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(f"invalid quantity {echo(value)}")
    text = (str(value) if not isinstance(value, int) or abs(value) <= INT64_MAX else "1e20").strip()
    if len(text) > MAX_DIGITS + 16:  # sign, point, suffix and exponent besides the digits
        raise QuantityError(f"invalid quantity {echo(value)}: longer than {MAX_DIGITS} digits")
    m = _QUANTITY.fullmatch(text)
    if m is None or not (m["int"] or m["frac"]):
        raise QuantityError(
            f"invalid quantity {echo(value)}: quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    int_digits, frac_digits = m["int"] or "", m["frac"] or ""
    if len(int_digits) + len(frac_digits) > MAX_DIGITS:
        raise QuantityError(f"invalid quantity {echo(value)}: longer than {MAX_DIGITS} digits")
    if m["exp"] is not None:
        exponent = int(m["exp"]) if len(m["exp"]) <= 12 else INT32_MAX + 1
        if not -INT32_MAX - 1 <= exponent <= INT32_MAX:
            raise QuantityError(f"invalid quantity {echo(value)}: unable to parse quantity's numeric part")
    else:
        exponent = _DECIMAL_POWERS[m["decimal"] or ""] if m["binary"] is None else 0
    binary = _BINARY_POWERS[m["binary"]] if m["binary"] is not None else 0
    digits = int_digits + frac_digits
    significant = digits.lstrip("0")
    if not significant:
        return Fraction(0)
    if m["sign"] == "-":
        raise QuantityError(f"must be greater than or equal to 0, got {echo(value)}")
    # The value is 0.<significant> * 10^order * 2^binary: its decimal order, known without expanding it.
    order = len(int_digits) + exponent - (len(digits) - len(significant))
    if order > 20:  # at least 10^20 > int64 whatever the unit
        raise QuantityError(f"quantity {echo(value)} is too large: {TOO_LARGE}")
    if order < _TINY_ORDER:
        return Fraction(1, 10 ** (-_TINY_ORDER + 10))  # positive, below any unit: rounds up to 1
    shift = order - len(significant)  # within [-130, 20]: the powers below stay small
    scale = Fraction(10**shift) if shift >= 0 else Fraction(1, 10**-shift)
    return Fraction(int(significant)) * scale * (1 << binary)


TOO_LARGE = f"the amount in the resource's unit (millicores for cpu) must be at most {INT64_MAX}"


def to_amount(resource: str, value: object) -> int:
    """A quantity as this model's integer: millicores for cpu, base units (rounded up) otherwise."""
    if type(value) is str:
        return _string_amount(resource == CPU, value)
    return _to_amount(resource, value)


@functools.lru_cache(maxsize=4096)
def _string_amount(is_cpu: bool, text: str) -> int:
    return _to_amount(CPU if is_cpu else "", text)


def _to_amount(resource: str, value: object) -> int:
    number = to_fraction(value)
    amount = math.ceil(number * 1000) if resource == CPU else math.ceil(number)
    if amount > INT64_MAX:
        raise QuantityError(f"quantity {echo(value)} is too large: {TOO_LARGE}")
    return amount


def is_whole(value: object) -> bool:
    """Whether the quantity is a whole number of base units (what integer resources need)."""
    return to_fraction(value).denominator == 1


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
