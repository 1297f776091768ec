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

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and bool(_DNS1123_LABEL.match(value))


def is_dns1123_subdomain(value: str) -> bool:
    return 0 < len(value) <= 253 and all(is_dns1123_label(part) for part in value.split("."))


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
    if not _QUALIFIED_NAME_PART.match(name):
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


def is_extended_resource_name(name: str) -> bool:
    """The kubelet's IsExtendedResourceName: fully qualified, outside kubernetes.io, and
    valid as a quota name (`requests.<name>` is a qualified name)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return qualified_name_problem("requests." + name) is None


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
