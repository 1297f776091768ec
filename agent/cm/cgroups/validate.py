"""Checks on limit values before anything is written, so the kernel never sees a bad one.

Each check raises CgroupError naming the cgroup and the file the value was meant for.
"""

from __future__ import annotations

from agent.cm.cgroups.api import CgroupError
from agent.cm.cgroups.formulas import MAX_QUOTA_PERIOD, MAX_SHARES, MIN_QUOTA_PERIOD, MIN_SHARES
from kubenode.cpuset import parse_cpuset


def is_unlimited(value: int | None) -> bool:
    return value is None or value == -1


def check_shares(cgroup: str, file: str, shares: int | None) -> None:
    if shares is not None and not MIN_SHARES <= shares <= MAX_SHARES:
        raise CgroupError(cgroup, file, f"cpu shares {shares} outside [{MIN_SHARES}, {MAX_SHARES}]")


def check_quota_period(cgroup: str, file: str, quota: int | None, period: int | None) -> None:
    if not is_unlimited(quota) and quota is not None and quota < MIN_QUOTA_PERIOD:
        raise CgroupError(
            cgroup, file, f"cpu quota {quota} µs below {MIN_QUOTA_PERIOD} µs (use -1 for unlimited)"
        )
    if period is not None and not MIN_QUOTA_PERIOD <= period <= MAX_QUOTA_PERIOD:
        raise CgroupError(
            cgroup, file, f"cpu period {period} µs outside [{MIN_QUOTA_PERIOD}, {MAX_QUOTA_PERIOD}]"
        )


def check_quota_within_parent(
    cgroup: str, file: str, quota: int | None, period: int, parent_quota: int | None, parent_period: int
) -> None:
    """cgroup v1 refuses (EINVAL) a child whose quota/period ratio exceeds its parent's."""
    if is_unlimited(parent_quota) or parent_quota is None:
        return
    if is_unlimited(quota) or quota is None or quota * parent_period > parent_quota * period:
        raise CgroupError(
            cgroup,
            file,
            f"cpu quota {quota}/{period} µs exceeds the parent's {parent_quota}/{parent_period} µs",
        )


def check_memory(cgroup: str, file: str, limit: int | None) -> None:
    if limit is not None and limit != -1 and limit <= 0:
        raise CgroupError(cgroup, file, f"memory limit {limit} must be > 0 bytes (or unlimited)")


def check_pids(cgroup: str, file: str, limit: int | None) -> None:
    if limit is not None and limit != -1 and limit <= 0:
        raise CgroupError(cgroup, file, f"pids limit {limit} must be > 0 (or -1 for unlimited)")


def checked_cpuset(cgroup: str, file: str, wanted: str, parent: frozenset[int]) -> frozenset[int]:
    """The CPUs (or memory nodes) of `wanted`, which must be non-empty and within the parent's."""
    try:
        cpus = parse_cpuset(wanted)
    except ValueError as err:
        raise CgroupError(cgroup, file, str(err)) from None
    if not cpus:
        raise CgroupError(cgroup, file, f"empty set {wanted!r}")
    outside = cpus - parent
    if outside:
        raise CgroupError(cgroup, file, f"{wanted!r} names {sorted(outside)}, not in the parent's set")
    return cpus
