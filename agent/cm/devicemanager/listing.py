"""A plain-text table of what plugins advertise, for `kubenode up` and status output."""

from __future__ import annotations

from collections.abc import Sequence

from agent.cm.devicemanager.records import ResourceStatus


def describe_resources(statuses: Sequence[ResourceStatus]) -> str:
    """One header line per resource (counts, connection) and one line per device (ID, health, NUMA)."""
    if not statuses:
        return "no device-plugin resources registered"
    lines = []
    for s in statuses:
        state = "connected" if s.connected else "disconnected"
        lines.append(
            f"{s.name}: capacity {s.capacity}, allocatable {s.allocatable}, allocated {s.allocated} ({state})"
        )
        width = max((len(d.id) for d in s.devices), default=0)
        for d in s.devices:
            numa = ",".join(str(n) for n in sorted(d.numa_nodes)) or "-"
            lines.append(f"  {d.id:<{width}}  {d.health:<9}  numa {numa}")
    return "\n".join(lines)
