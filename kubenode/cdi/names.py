"""CDI names: the kind `vendor/class` and the qualified device name `vendor/class=name`.

The rules are the CDI reference library's (tags.cncf.io/container-device-interface pkg/parser): a vendor
and a class start with a letter, end with a letter or digit, and hold letters, digits, `_`, `-` and `.`;
a device name starts and ends with a letter or digit and may also hold `:` (and `.`, `_`, `-`).
"""

from __future__ import annotations

import re

_VENDOR_OR_CLASS = re.compile(r"[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?\Z")
_DEVICE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?\Z")


class CdiNameError(ValueError):
    pass


def check_vendor_or_class(text: str, what: str) -> None:
    if not _VENDOR_OR_CLASS.match(text):
        raise CdiNameError(
            f"{what} {text!r} must start with a letter, end with a letter or digit, and hold only "
            "letters, digits, '_', '-' and '.'"
        )


def check_device_name(text: str) -> None:
    if not _DEVICE.match(text):
        raise CdiNameError(
            f"device name {text!r} must start and end with a letter or digit and hold only "
            "letters, digits, '_', '-', '.' and ':'"
        )


def parse_kind(kind: str) -> tuple[str, str]:
    """`vendor/class` as (vendor, class), both checked."""
    vendor, slash, device_class = kind.partition("/")
    if not slash or not vendor or not device_class:
        raise CdiNameError(f"kind {kind!r} must be vendor/class")
    check_vendor_or_class(vendor, "vendor")
    check_vendor_or_class(device_class, "class")
    return vendor, device_class


def parse_qualified_name(name: str) -> tuple[str, str, str]:
    """`vendor/class=name` as (vendor, class, name), each part checked; errors name the whole name."""
    kind, equals, device = name.partition("=")
    if not equals or not device:
        raise CdiNameError(f"CDI device {name!r} is not qualified (vendor/class=name)")
    try:
        vendor, device_class = parse_kind(kind)
        check_device_name(device)
    except CdiNameError as exc:
        raise CdiNameError(f"CDI device {name!r}: {exc}") from None
    return vendor, device_class, device


def qualified_name(kind: str, device: str) -> str:
    return f"{kind}={device}"
