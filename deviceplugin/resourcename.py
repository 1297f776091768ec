"""The kubelet's rule for extended resource names (what `Register` accepts).

A device plugin's resource name must be an extended resource: it contains "/",
is not in the `kubernetes.io/` namespace, does not start with `requests.`, and
`requests.<name>` must be a qualified name (DNS-subdomain prefix up to 253
characters, "/", then a name up to 63 characters).
"""

from __future__ import annotations

import re

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def extended_resource_name_error(name: str) -> str | None:
    """Why `name` is not a valid extended resource name, or None when it is."""
    if "/" not in name:
        return f"{name!r} must have a domain prefix, e.g. example.com/{name or 'device'}"
    if "kubernetes.io/" in name:
        return f"{name!r} is in the reserved kubernetes.io namespace"
    if name.startswith("requests."):
        return f"{name!r} must not start with 'requests.'"
    return _qualified_name_error("requests." + name, shown=name)


def _qualified_name_error(full: str, shown: str) -> str | None:
    prefix, _, base = full.partition("/")
    if "/" in base:
        return f"{shown!r} must contain exactly one '/'"
    if len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix):
        return f"{shown!r}: prefix must be a lowercase DNS subdomain (at most 244 characters)"
    if not base or len(base) > 63 or not _QUALIFIED_NAME.fullmatch(base):
        return (
            f"{shown!r}: the part after '/' must be 1-63 characters of [-_.A-Za-z0-9], "
            "starting and ending with a letter or digit"
        )
    return None
