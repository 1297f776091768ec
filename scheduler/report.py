"""Render a simulation as a text table or as one JSON object."""

from __future__ import annotations

import json

from kubenode.model.quantity import format_amount
from kubenode.table import table_lines
from scheduler.simulate import SimulationResult


def _utilisation(requested: int, allocatable: int) -> str:
    return f"{100 * requested / allocatable:.0f}%" if allocatable else "-"


def render_table(result: SimulationResult) -> str:
    lines = table_lines(("POD", "NODE", "RESULT"), [(p.pod, p.node or "-", p.message) for p in result.pods])
    if result.preemptions:
        lines += ["", "PREEMPTED", *result.preemptions]
    rows: list[list[str]] = []
    for name, usage in result.nodes.items():
        for resource in sorted(set(usage.allocatable) | set(usage.requested)):
            have = usage.allocatable.get(resource, 0)
            used = usage.requested.get(resource, 0)
            rows.append(
                [
                    name,
                    resource,
                    format_amount(resource, used),
                    format_amount(resource, have),
                    _utilisation(used, have),
                ]
            )
    if rows:
        lines += ["", *table_lines(("NODE", "RESOURCE", "REQUESTED", "ALLOCATABLE", "USED"), rows)]
    zones = [
        [name, zone, resource, format_amount(resource, available), format_amount(resource, allocatable)]
        for name, usage in result.nodes.items()
        for zone, resources in usage.zones.items()
        for resource, (available, allocatable) in sorted(resources.items())
    ]
    if zones:
        lines += ["", *table_lines(("NODE", "NUMA ZONE", "RESOURCE", "AVAILABLE", "ALLOCATABLE"), zones)]
    return "\n".join(lines)


def render_json(result: SimulationResult) -> str:
    return json.dumps(result.as_json(), indent=2)
