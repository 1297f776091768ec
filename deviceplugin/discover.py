"""`kubenode deviceplugin discover`: what each configured resource would advertise, as a table or JSON.

For cpu resources it also says whether CDI pinning is on and whether the CDI spec dir exists: without
it a kubelet's containers get only KUBENODE_CPUSET and are not pinned (see deviceplugin.cdi).
"""

from __future__ import annotations

import json
import os
from typing import Any

from deviceplugin.backends import make_backend
from deviceplugin.config import CpuOptions, PluginConfig
from kubenode.deviceapi import HEALTHY, UNHEALTHY
from kubenode.table import table_lines


def discover(config: PluginConfig, kubelet_dir: str) -> list[dict[str, Any]]:
    """One entry per resource: name, backend, socket, replicas, devices (id, health, numa); cpu: cdi."""
    result = []
    for resource in config.resources:
        backend = make_backend(resource, kubelet_dir)
        try:
            devices = backend.devices()
        finally:
            backend.stop()
        entry: dict[str, Any] = {
            "name": resource.name,
            "backend": resource.backend,
            "socket": resource.socket,
            "replicas": resource.replicas,
            "devices": [
                {"id": d.id, "health": HEALTHY if d.healthy else UNHEALTHY, "numa": list(d.numa_nodes)}
                for d in devices
            ],
        }
        if resource.backend == "cpu":
            entry["cdi"] = cdi_status(resource.cpu)
        result.append(entry)
    return result


def cdi_status(options: CpuOptions) -> dict[str, Any]:
    from deviceplugin.backends.cpu import cdi_enabled

    return {
        "enabled": cdi_enabled(options),
        "specDir": options.cdi_spec_dir,
        "specDirExists": os.path.isdir(options.cdi_spec_dir),
    }


def cdi_line(resource: dict[str, Any]) -> str:
    status = resource["cdi"]
    exists = "exists" if status["specDirExists"] else "does not exist"
    if status["enabled"]:
        return f"{resource['name']}: CDI pinning on (spec dir {status['specDir']} {exists})"
    return (
        f"{resource['name']}: CDI pinning off (spec dir {status['specDir']} {exists}): "
        "under a kubelet containers get KUBENODE_CPUSET only, unpinned"
    )


def render_json(resources: list[dict[str, Any]]) -> str:
    return json.dumps({"resources": resources}, indent=2)


def render_table(resources: list[dict[str, Any]]) -> str:
    rows: list[tuple[str, ...]] = []
    for resource in resources:
        if not resource["devices"]:
            rows.append((resource["name"], resource["backend"], "(none)", "-", "-"))
        for device in resource["devices"]:
            numa = ",".join(str(n) for n in device["numa"]) or "-"
            rows.append((resource["name"], resource["backend"], device["id"], device["health"], numa))
    lines = table_lines(("RESOURCE", "BACKEND", "DEVICE", "HEALTH", "NUMA"), rows)
    lines += [cdi_line(resource) for resource in resources if "cdi" in resource]
    return "\n".join(lines)
