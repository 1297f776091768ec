"""Semantic versions (semver 2.0.0) as Kubernetes' CEL `semver()` library and version attributes read them.

Strict parsing: MAJOR.MINOR.PATCH with optional -prerelease and +build; leading zeros refused in
numeric parts. Ordering is semver's: numbers, then a release above its prereleases, prerelease
identifiers compared numerically when numeric and lexically otherwise; build metadata ignored.
"""

from __future__ import annotations

import functools
import re

_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)

# (major, minor, patch, is_release, prerelease identifiers as (is_text, number, text))
Key = tuple[int, int, int, bool, tuple[tuple[bool, int, str], ...]]


class SemverError(ValueError):
    pass


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Key:
    m = _SEMVER.fullmatch(text)
    if m is None:
        raise SemverError(f"invalid semver {text!r}")
    pre = tuple(
        (False, int(part), "") if part.isdigit() else (True, 0, part)
        for part in (m[4].split(".") if m[4] else ())
    )
    return int(m[1]), int(m[2]), int(m[3]), not pre, pre


def normalize(text: str) -> str:
    """Kube's relaxed form (`semver(s, true)`): a leading "v" dropped, missing minor and patch added as 0,
    leading zeros dropped from the three numbers."""
    text = text[1:] if text.startswith("v") else text
    cut = re.search(r"[-+]", text)
    core, rest = (text[: cut.start()], text[cut.start() :]) if cut else (text, "")
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise SemverError(f"invalid semver {text!r}")
    parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(parts) + rest


def is_semver(text: str, relaxed: bool = False) -> bool:
    try:
        parse(normalize(text) if relaxed else text)
    except SemverError:
        return False
    return True


def compare(a: str, b: str) -> int:
    ka, kb = parse(a), parse(b)
    return (ka > kb) - (ka < kb)
