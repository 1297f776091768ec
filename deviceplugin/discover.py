"""`kubenode deviceplugin discover`: what each configured resource would advertise, as a table or JSON."""

from __future__ import annotations

import json
from typing import Any

from deviceplugin.backends import make_backend
from deviceplugin.config import PluginConfig
from kubenode.deviceapi import HEALTHY, UNHEALTHY
from kubenode.table import table_lines


def discover(config: PluginConfig, kubelet_dir: str) -> list[dict[str, Any]]:
    """One entry per resource: name, backend, socket, replicas and devices (id, health, numa)."""
    result = []
    for resource in config.resources:
        backend = make_backend(resource, kubelet_dir)
        try:
            devices = backend.devices()
        finally:
            backend.stop()
        result.append(
            {
                "name": resource.name,
                "backend": resource.backend,
                "socket": resource.socket,
                "replicas": resource.replicas,
                "devices": [
                    {
                        "id": d.id,
                        "health": HEALTHY if d.healthy else UNHEALTHY,
                        "numa": list(d.numa_nodes),
                    }
                    for d in devices
                ],
            }
        )
    return result


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
    return "\n".join(table_lines(("RESOURCE", "BACKEND", "DEVICE", "HEALTH", "NUMA"), rows))
