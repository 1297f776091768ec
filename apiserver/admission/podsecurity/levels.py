"""Levels, versions and the namespace labels that choose them (kube's pod-security-admission/api).

`policy_to_evaluate(labels, defaults)` returns the Policy and the label errors, failing closed for
enforce (a bad level means restricted) and open for audit and warn (privileged), as kube does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
LATEST = -1  # the minor version of "latest"
_VERSION = re.compile(r"v1\.(0|[1-9][0-9]*)")
LEVEL_ERROR = "must be one of privileged, baseline, restricted"
VERSION_ERROR = 'must be "latest" or "v1.x"'


@dataclass(frozen=True)
class LevelVersion:
    level: str = PRIVILEGED
    minor: int = LATEST  # policy version v1.<minor>, or LATEST

    def __str__(self) -> str:
        return f"{self.level}:{'latest' if self.minor == LATEST else f'v1.{self.minor}'}"


@dataclass(frozen=True)
class Policy:
    enforce: LevelVersion = LevelVersion()
    audit: LevelVersion = LevelVersion()
    warn: LevelVersion = LevelVersion()

    def fully_privileged(self) -> bool:
        return all(lv.level == PRIVILEGED for lv in (self.enforce, self.audit, self.warn))


LabelError = tuple[str, str, str]  # (label, value, message)


def parse_level(text: str) -> str | None:
    return text if text in LEVELS else None


def parse_version(text: str) -> int | None:
    """The minor version of "v1.x", LATEST for "latest", None when it is neither."""
    if text == "latest":
        return LATEST
    match = _VERSION.fullmatch(text)
    return int(match.group(1)) if match else None


def compare_levels(a: str, b: str) -> int:
    return LEVELS.index(a) - LEVELS.index(b)


def policy_to_evaluate(labels: Mapping[str, str] | None, defaults: Policy) -> tuple[Policy, list[LabelError]]:
    """kube's api.PolicyToEvaluate: the labels over the defaults; warn follows a stricter explicit enforce."""
    if not labels:
        return defaults, []
    errors: list[LabelError] = []
    modes = {"enforce": defaults.enforce, "audit": defaults.audit, "warn": defaults.warn}
    for mode in MODES:
        level_label, version_label = LABEL_PREFIX + mode, LABEL_PREFIX + mode + "-version"
        if level_label in labels:
            level = parse_level(labels[level_label])
            if level is None:
                errors.append((level_label, labels[level_label], LEVEL_ERROR))
                level = RESTRICTED if mode == "enforce" else PRIVILEGED  # closed for enforce, open otherwise
            modes[mode] = replace(modes[mode], level=level)
        if version_label in labels:
            minor = parse_version(labels[version_label])
            if minor is None:
                errors.append((version_label, labels[version_label], VERSION_ERROR))
                minor = LATEST
            modes[mode] = replace(modes[mode], minor=minor)
    enforce_set = (
        LABEL_PREFIX + "enforce" in labels and parse_level(labels[LABEL_PREFIX + "enforce"]) is not None
    )
    if (
        LABEL_PREFIX + "warn" not in labels
        and enforce_set
        and compare_levels(modes["enforce"].level, modes["warn"].level) > 0
    ):
        warn_version = (
            modes["warn"].minor if LABEL_PREFIX + "warn-version" in labels else modes["enforce"].minor
        )
        modes["warn"] = LevelVersion(modes["enforce"].level, warn_version)
    return Policy(modes["enforce"], modes["audit"], modes["warn"]), errors
