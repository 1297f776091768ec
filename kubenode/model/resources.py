"""Resource names and resource-list arithmetic.

A resource list maps a resource name to an integer amount (see `quantity`). Extended
resources follow the kubelet's rules (v1helper.IsExtendedResourceName), which the
device manager also applies to device plugin registrations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

ResourceList = dict[str, int]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
HUGEPAGES_PREFIX = "hugepages-"
NATIVE_RESOURCES = frozenset({CPU, MEMORY, PODS, EPHEMERAL_STORAGE})

_DNS1123_LABEL_PATTERN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_DNS1123_LABEL_PATTERN)
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL_PATTERN}(\.{_DNS1123_LABEL_PATTERN})*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS1123_LABEL.fullmatch(value))


def is_dns1123_subdomain(value: str) -> bool:
    """Kubernetes' IsDNS1123Subdomain: at most 253 characters in all (no limit of its own on each label)."""
    return len(value) <= 253 and bool(_DNS1123_SUBDOMAIN.fullmatch(value))


def qualified_name_problem(value: str) -> str | None:
    """Why value is not a Kubernetes qualified name (`[prefix/]name`), or None if it is one."""
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if prefix and not is_dns1123_subdomain(prefix):
        return "prefix part must be a lowercase RFC 1123 subdomain of at most 253 characters"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME_PART.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def is_native_resource(name: str) -> bool:
    """Resources the kubelet itself accounts for (not extended resources)."""
    return name in NATIVE_RESOURCES or name.startswith(HUGEPAGES_PREFIX) or "kubernetes.io/" in name


def is_overcommit_allowed(name: str) -> bool:
    """v1helper.IsOvercommitAllowed: a request may be below its limit (native, not hugepages).
    Extended resources and hugepages need a limit and a request equal to it."""
    return is_native_resource(name) and not name.startswith(HUGEPAGES_PREFIX)


def is_integer_resource(name: str) -> bool:
    """helper.IsIntegerResourceName (for the names kubenode reads): pods and extended resources."""
    return name == PODS or is_extended_resource_name(name)


def extended_resource_name_problem(name: str) -> str | None:
    """Why `name` is not an extended resource name (the kubelet's IsExtendedResourceName), or None if it is:
    it must be fully qualified, outside kubernetes.io, and valid as a quota name (`requests.<name>` is a
    qualified name)."""
    if "/" not in name:
        return f"must have a domain prefix, e.g. example.com/{name or 'device'}"
    if "kubernetes.io/" in name:
        return "is in the reserved kubernetes.io namespace"
    if name.startswith("requests."):
        return "must not start with 'requests.'"
    if (problem := qualified_name_problem("requests." + name)) is not None:
        return f"is not valid as the quota name 'requests.{name}': {problem}"
    return None


def is_extended_resource_name(name: str) -> bool:
    return extended_resource_name_problem(name) is None


def add_into(total: ResourceList, more: Mapping[str, int]) -> ResourceList:
    """total += more, in place; returns total."""
    for name, amount in more.items():
        total[name] = total.get(name, 0) + amount
    return total


def max_into(total: ResourceList, other: Mapping[str, int]) -> ResourceList:
    """total = elementwise max(total, other), in place; returns total."""
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount
    return total


def summed(lists: Iterable[Mapping[str, int]]) -> ResourceList:
    total: ResourceList = {}
    for item in lists:
        add_into(total, item)
    return total
