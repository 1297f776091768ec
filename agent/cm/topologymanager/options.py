"""Topology Manager policy options (the kubelet's topologymanager/policy_options.go).

`prefer-closest-numa-nodes=<bool>`: among equally narrow masks prefer the one whose nodes are
closest (sysfs distances) rather than the lowest-numbered. `max-allowable-numa-nodes=<int>`:
raise the kubelet's limit of 8 NUMA nodes (no lower than 8). Values parse as Go's
strconv.ParseBool and Atoi do; an unknown option or a bad value is a PolicyOptionError.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PREFER_CLOSEST_NUMA_NODES = "prefer-closest-numa-nodes"
MAX_ALLOWABLE_NUMA_NODES = "max-allowable-numa-nodes"
KNOWN_OPTIONS = (PREFER_CLOSEST_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES)
# The kubelet refuses a policy other than none on a machine with more NUMA nodes than this, as merging
# hints is exponential in the number of nodes.
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class PolicyOptionError(ValueError):
    pass


@dataclass(frozen=True)
class PolicyOptions:
    prefer_closest_numa: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES


def _parse_bool(name: str, value: str) -> bool:
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise PolicyOptionError(
        f'bad value for option "{name}": strconv.ParseBool: parsing "{value}": invalid syntax'
    )


def _parse_int(name: str, value: str) -> int:
    text = value[1:] if value[:1] in "+-" else value
    if not text.isdigit():
        raise PolicyOptionError(
            f'bad value for option "{name}": strconv.Atoi: parsing "{value}": invalid syntax'
        )
    return int(value)


def parse_policy_options(options: Mapping[str, str]) -> PolicyOptions:
    prefer_closest = False
    max_nodes = 0
    for name, value in sorted(options.items()):
        if name == PREFER_CLOSEST_NUMA_NODES:
            prefer_closest = _parse_bool(name, value)
        elif name == MAX_ALLOWABLE_NUMA_NODES:
            max_nodes = _parse_int(name, value)
        else:
            raise PolicyOptionError(f'unknown Topology Manager Policy option: "{name}"')
    if max_nodes == 0:
        max_nodes = DEFAULT_MAX_ALLOWABLE_NUMA_NODES
    if max_nodes < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
        raise PolicyOptionError(
            f'the minimum value of "{MAX_ALLOWABLE_NUMA_NODES}" should not be less than '
            f"{DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
        )
    return PolicyOptions(prefer_closest, max_nodes)


def parse_options_text(text: str) -> dict[str, str]:
    """The flag's "key=value,key=value" form; PolicyOptionError names an item without "="."""
    options: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise PolicyOptionError(f'invalid option "{item}": expected key=value')
        options[name.strip()] = value.strip()
    return options
