"""The kubelet's extended-resource-name rule, used to validate Register requests.

A name is an extended resource when it contains `/`, is not a `kubernetes.io/` name, does not start with
`requests.`, and `requests.<name>` is a qualified name (DNS-subdomain prefix of at most 253 characters, then a
name part of at most 63 characters that starts and ends alphanumeric with `-_.` allowed inside).
"""

from __future__ import annotations

import re

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_MAX_PREFIX = 253
_MAX_NAME = 63
_QUOTA_PREFIX = "requests."


def is_qualified_name(value: str) -> bool:
    """Kubernetes `IsQualifiedName`: optional DNS-subdomain prefix and a short name part."""
    parts = value.split("/")
    if len(parts) == 1:
        prefix, name = "", parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > _MAX_PREFIX or not _DNS_SUBDOMAIN.match(prefix):
            return False
    else:
        return False
    return 0 < len(name) <= _MAX_NAME and bool(_QUALIFIED_NAME_PART.match(name))


def is_extended_resource_name(name: str) -> bool:
    """Kubernetes `IsExtendedResourceName` for a resource name such as `vendor.com/gpu`."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith(_QUOTA_PREFIX):
        return False
    return is_qualified_name(_QUOTA_PREFIX + name)


def is_bare_file_name(endpoint: str) -> bool:
    """An endpoint must name a socket directly inside the plugin directory."""
    return bool(endpoint) and endpoint not in (".", "..") and "/" not in endpoint and "\0" not in endpoint


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """Parse the kernel list format (`2-3,6`) into sorted CPU ids; raises ValueError naming the bad part."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        first, dash, last = part.partition("-")
        try:
            low = int(first)
            high = int(last) if dash else low
        except ValueError:
            raise ValueError(f"bad CPU list element {part!r} in {text!r}") from None
        if low < 0 or high < low:
            raise ValueError(f"bad CPU range {part!r} in {text!r}")
        cpus.update(range(low, high + 1))
    return tuple(sorted(cpus))
