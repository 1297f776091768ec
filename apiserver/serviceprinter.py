"""Table columns and cells for Services, as kube's printService (pkg/printers/internalversion/printers.go):
NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE, and SELECTOR with `-o wide`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apiserver.tablecells import AGE, NAME, NONE, Obj, column, since
from apiserver.tablecells import meta as _meta
from apiserver.tablecells import spec as _spec
from apiserver.tablecells import status as _status

SERVICE_COLUMNS = [
    NAME,
    column("Type", "type determines how the Service is exposed."),
    column("Cluster-IP", "clusterIP is the IP address of the service, usually assigned randomly."),
    column("External-IP", "externalIPs is a list of IP addresses for which nodes will also accept traffic."),
    column("Port(s)", "The list of ports that are exposed by this service."),
    AGE,
    column("Selector", "Route traffic to pods with labels matching this selector.", priority=1),
]  # fmt: skip


def _external_ip(service: Obj) -> str:
    spec = _spec(service)
    external = [str(ip) for ip in spec.get("externalIPs") or []]
    kind = spec.get("type") or "ClusterIP"
    if kind == "ExternalName":
        return str(spec.get("externalName") or "")
    if kind == "LoadBalancer":
        ingress = (_status(service).get("loadBalancer") or {}).get("ingress") or []
        found = [str(i.get("ip") or i.get("hostname") or "") for i in ingress] + external
        return ",".join(f for f in found if f) or "<pending>"
    return ",".join(external) or NONE


def _ports(service: Obj) -> str:
    shown = []
    for port in _spec(service).get("ports") or []:
        protocol = port.get("protocol") or "TCP"
        node_port = port.get("nodePort")
        number = f"{port.get('port')}:{node_port}" if node_port else str(port.get("port"))
        shown.append(f"{number}/{protocol}")
    return ",".join(shown) or NONE


def service_cells(service: Obj, now: datetime) -> list[Any]:
    spec = _spec(service)
    selector = spec.get("selector") or {}
    return [
        _meta(service).get("name", ""),
        spec.get("type") or "ClusterIP",
        spec.get("clusterIP") or NONE,
        _external_ip(service),
        _ports(service),
        since(_meta(service).get("creationTimestamp"), now),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or NONE,
    ]
