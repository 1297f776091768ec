"""What an allocation writes into a claim's `status.allocation`: device results, config and node selector.

Config, as kube's allocator carries it: each class's config once (source FromClass) listing the
requests that used the class, then the claim's own config (source FromClaim) for the requests it
names (a subrequest's "request/sub" name counts, an unchosen subrequest's config is left out); a
claim config that names no request applies to all and lists none.

The node selector says where the devices can be reached: a node-local slice pins the node
(`metadata.name` field), a slice with a nodeSelector brings its one term, an allNodes slice adds
nothing (no selector at all when every device is network-wide).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubenode.dra.types import DeviceClass, DeviceResult, OpaqueConfig, ResourceClaim, ResourceSlice
from kubenode.model.objects import Node

FROM_CLASS, FROM_CLAIM = "FromClass", "FromClaim"


@dataclass(frozen=True)
class ClaimAllocation:
    claim: ResourceClaim
    results: tuple[DeviceResult, ...]
    config: tuple[dict[str, Any], ...]
    node_selector: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        """The claim's `status.allocation`."""
        devices: dict[str, Any] = {"results": [result.to_json() for result in self.results]}
        if self.config:
            devices["config"] = list(self.config)
        out: dict[str, Any] = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector
        return out


def _entry(source: str, requests: list[str], config: OpaqueConfig) -> dict[str, Any]:
    opaque: dict[str, Any] = {"driver": config.driver}
    if config.parameters is not None:
        opaque["parameters"] = config.parameters
    return {"source": source, "requests": requests, "opaque": opaque}


def allocation_config(
    claim: ResourceClaim, chosen: Sequence[tuple[str, DeviceClass]]
) -> tuple[dict[str, Any], ...]:
    """`chosen`: per request of the claim, the full name of what was allocated and its class."""
    if not claim.config:  # the usual case: no config at all (a loop: this runs at every Reserve)
        for _, device_class in chosen:
            if device_class.config:
                break
        else:
            return ()
    entries: list[dict[str, Any]] = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    for name, device_class in chosen:
        if device_class.name in by_class:
            for entry in by_class[device_class.name]:
                entry["requests"].append(name)
            continue
        made = [_entry(FROM_CLASS, [name], config) for config in device_class.config]
        by_class[device_class.name] = made
        entries.extend(made)
    chosen_names = {name for name, _ in chosen}
    request_names = {request.name for request in claim.requests}
    for config in claim.config:
        if not config.requests or set(config.requests) & (chosen_names | request_names):
            entries.append(_entry(FROM_CLAIM, list(config.requests), config))
    for entry in entries:
        if not entry["requests"]:
            del entry["requests"]  # empty: every request
    return tuple(entries)


def _pinned(node: Node) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": "In", "values": [node.name]}


def node_selector(node: Node, slices: Sequence[ResourceSlice]) -> dict[str, Any] | None:
    if len(slices) == 1 and slices[0].node_name:  # the usual case: one device of a node-local slice
        return {"nodeSelectorTerms": [{"matchFields": [_pinned(node)]}]}
    fields: list[dict[str, Any]] = []
    expressions: list[dict[str, Any]] = []
    for resource_slice in slices:
        if resource_slice.node_name:
            field = _pinned(node)
            if field not in fields:
                fields.append(field)
        elif resource_slice.node_selector is not None:
            terms = resource_slice.node_selector.get("nodeSelectorTerms") or []
            if len(terms) == 1:
                for key, into in (("matchFields", fields), ("matchExpressions", expressions)):
                    into.extend(r for r in terms[0].get(key) or [] if r not in into)
            else:  # several ORed terms cannot be ANDed with the rest: pin the node instead
                field = _pinned(node)
                if field not in fields:
                    fields.append(field)
    if not fields and not expressions:
        return None
    term: dict[str, Any] = {}
    if expressions:
        term["matchExpressions"] = expressions
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}
