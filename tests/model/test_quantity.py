from __future__ import annotations

import pytest

from kubenode.model.quantity import QuantityError, format_amount, to_amount


@pytest.mark.parametrize(
    ("resource", "text", "amount"),
    [
        ("cpu", "200m", 200),
        ("cpu", "2", 2000),
        ("cpu", 2, 2000),
        ("cpu", "0.5", 500),
        ("cpu", "1.0001", 1001),  # rounded up, like MilliValue()
        ("memory", "1Gi", 2**30),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129000000),
        ("memory", "123Mi", 123 * 2**20),
        ("memory", "1k", 1000),
        ("kubenode.io/gpu", "2", 2),
        ("pods", 110, 110),
    ],
)
def test_to_amount(resource: str, text: object, amount: int) -> None:
    assert to_amount(resource, text) == amount


@pytest.mark.parametrize("text", ["-1", "abc", "1.5.3", "", "1Zi", None, True, "inf"])
def test_bad_quantities_are_rejected(text: object) -> None:
    with pytest.raises(QuantityError):
        to_amount("cpu", text)


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("memory", 2**30, "1Gi"),
        ("memory", 1000, "1000"),
        ("x/y", 3, "3"),
    ],
)
def test_format_amount(resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text
