"""core/v1 Services: defaults, ClusterIP and NodePort allocation, validation, and `default/kubernetes`.

Flow of a create: `prepare_create` defaults the spec as kube's defaulting and REST strategy do (type
ClusterIP, TCP ports whose targetPort is the port, single-stack IPv4, session affinity None) and
allocates what the client left out: a ClusterIP from `SERVICE_CIDR` (kubeadm's default range) and
NodePorts from 30000-32767 for NodePort and LoadBalancer Services. `validate` checks types, ports,
protocols and that a requested ClusterIP or NodePort is in range and free, with kube's messages.

What is allocated is read from the stored Services through `allocated` (each Service's index: its
ClusterIP and NodePorts), which the daemon points at the watch cache; the hooks never touch storage.
Allocation is random within the range, so two concurrent creates colliding is improbable, not
impossible (kube keeps an allocation bitmap in etcd). Nothing proxies: no kube-proxy, no Endpoints.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from apiserver.registry.base import Cause, Clock, Strategy, utc_now, value_repr
from apiserver.resources import ResourceInfo

SERVICE_CIDR = "10.96.0.0/12"
NODE_PORTS = range(30000, 32768)
TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
PROTOCOLS = ("SCTP", "TCP", "UDP")
KUBERNETES_SERVICE = "kubernetes"  # default/kubernetes: the API server itself
_INDEX_IP = "spec.clusterIP"
_INDEX_PORTS = "spec.ports.nodePort"


def _supported(values: Iterable[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _go_strings(values: Iterable[str]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


class ServiceStrategy(Strategy):
    model = "V1Service"
    has_status = True
    returns_deleted_object = True

    def __init__(self, info: ResourceInfo, clock: Clock = utc_now, cidr: str = SERVICE_CIDR) -> None:
        super().__init__(info, clock)
        self.network = ipaddress.ip_network(cidr)
        # The index of every stored Service (see `index`); the daemon points it at the watch cache.
        self.allocated: Callable[[], Iterable[Mapping[str, str]]] = lambda: ()

    @property
    def first_ip(self) -> str:
        """The ClusterIP of default/kubernetes: the range's first address, as kube gives it."""
        return str(self.network.network_address + 1)

    def index(self, obj: Mapping[str, Any]) -> dict[str, str]:
        spec = obj.get("spec") or {}
        ports = [str(p.get("nodePort")) for p in spec.get("ports") or [] if p.get("nodePort")]
        return {_INDEX_IP: str(spec.get("clusterIP") or ""), _INDEX_PORTS: ",".join(ports)}

    def _taken(self) -> tuple[set[str], set[int]]:
        ips: set[str] = set()
        ports: set[int] = set()
        for fields in self.allocated():
            ips.add(fields.get(_INDEX_IP, ""))
            ports.update(int(p) for p in fields.get(_INDEX_PORTS, "").split(",") if p)
        return ips, ports

    def prepare_create(self, obj: dict[str, Any]) -> None:
        spec = obj.setdefault("spec", {})
        self._default(spec)
        obj["status"] = {"loadBalancer": {}}
        ips, node_ports = self._taken()
        if spec["type"] != "ExternalName" and not spec.get("clusterIP"):
            spec["clusterIP"] = self._free_ip(ips)
        if spec.get("clusterIP"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        if spec["type"] in ("NodePort", "LoadBalancer"):
            for port in spec.get("ports") or []:
                if isinstance(port, dict) and not port.get("nodePort"):
                    port["nodePort"] = self._free_node_port(node_ports)
                    node_ports.add(port["nodePort"])

    def prepare_update(self, new: dict[str, Any], old: Mapping[str, Any]) -> None:
        super().prepare_update(new, old)
        spec = new.setdefault("spec", {})
        old_spec = old.get("spec") or {}
        for key in ("clusterIP", "clusterIPs"):  # kept when the client leaves them out, as kube does
            if not spec.get(key) and old_spec.get(key):
                spec[key] = old_spec[key]
        self._default(spec)

    @staticmethod
    def _default(spec: dict[str, Any]) -> None:
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec["type"] != "ExternalName":
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if port.get("port") is not None:
                    port.setdefault("targetPort", port["port"])

    def _free_ip(self, taken: set[str]) -> str:
        first = int(self.network.network_address) + 2  # .1 is default/kubernetes'
        last = int(self.network.broadcast_address) - 1
        for _ in range(64):
            candidate = str(ipaddress.ip_address(random.randint(first, last)))
            if candidate not in taken:
                return candidate
        raise RuntimeError(f"no free ClusterIP found in {self.network}")

    @staticmethod
    def _free_node_port(taken: set[int]) -> int:
        free = [p for p in NODE_PORTS if p not in taken]
        if not free:
            raise RuntimeError("no free NodePort in 30000-32767")
        return random.choice(free)

    def validate(self, obj: dict[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
        spec = obj.get("spec") or {}
        old_spec = (old or {}).get("spec") or {}
        service_type = spec.get("type")
        if service_type not in TYPES:
            message = f"Unsupported value: {value_repr(service_type)}: supported values: {_supported(TYPES)}"
            return [("spec.type", "FieldValueNotSupported", message)]
        causes = self._validate_ports(spec, old_spec)
        headless = spec.get("clusterIP") == "None"
        if service_type == "ExternalName":
            if not spec.get("externalName"):
                causes.append(("spec.externalName", "FieldValueRequired", "Required value"))
        elif not spec.get("ports") and not headless:
            causes.append(("spec.ports", "FieldValueRequired", "Required value"))
        ip = spec.get("clusterIP")
        if old is not None and old_spec.get("clusterIP") and ip != old_spec.get("clusterIP"):
            message = f"Invalid value: {_go_strings(spec.get('clusterIPs') or [ip])}: may not change once set"
            causes.append(("spec.clusterIPs[0]", "FieldValueInvalid", message))
        elif old is None and ip and not headless:
            causes.extend(self._check_ip(str(ip)))
        return causes

    def _check_ip(self, ip: str) -> list[Cause]:
        shown = f"Invalid value: {_go_strings([ip])}: failed to allocate IP {ip}: "
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return [("spec.clusterIPs[0]", "FieldValueInvalid", f"Invalid value: {value_repr(ip)}: must be "
                     "a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]  # fmt: skip
        if address not in self.network:
            problem = (
                f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is {self.network}"
            )
            return [("spec.clusterIPs", "FieldValueInvalid", shown + problem)]
        if ip in self._taken()[0]:
            return [("spec.clusterIPs", "FieldValueInvalid", shown + "provided IP is already allocated")]
        return []

    def _validate_ports(self, spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> list[Cause]:
        causes: list[Cause] = []
        ports = spec.get("ports") or []
        names: set[str] = set()
        old_node_ports = {p.get("nodePort") for p in old_spec.get("ports") or [] if isinstance(p, dict)}
        taken_node_ports = self._taken()[1] - old_node_ports
        for i, port in enumerate(ports):
            where = f"spec.ports[{i}]"
            name = str(port.get("name") or "")
            if len(ports) > 1 and not name:
                causes.append((f"{where}.name", "FieldValueRequired", "Required value"))
            elif name in names:
                duplicate = f"Duplicate value: {value_repr(name)}"
                causes.append((f"{where}.name", "FieldValueDuplicate", duplicate))
            names.add(name)
            causes.extend(_check_port(where, port, str(spec.get("type")), taken_node_ports))
        return causes


def _check_port(where: str, port: Mapping[str, Any], service_type: str, taken: set[int]) -> list[Cause]:
    causes: list[Cause] = []
    number = port.get("port")
    if not isinstance(number, int) or not 1 <= number <= 65535:
        message = f"Invalid value: {value_repr(number)}: must be between 1 and 65535, inclusive"
        causes.append((f"{where}.port", "FieldValueInvalid", message))
    protocol = port.get("protocol")
    if protocol not in PROTOCOLS:
        message = f"Unsupported value: {value_repr(protocol)}: supported values: {_supported(PROTOCOLS)}"
        causes.append((f"{where}.protocol", "FieldValueNotSupported", message))
    node_port = port.get("nodePort")
    if not node_port:
        return causes
    if service_type not in ("NodePort", "LoadBalancer"):
        forbidden = f"Forbidden: may not be used when `type` is '{service_type}'"
        causes.append((f"{where}.nodePort", "FieldValueForbidden", forbidden))
    elif node_port not in NODE_PORTS:
        valid = f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}"
        why = f"provided port is not in the valid range. The range of valid ports is {valid}"
        causes.append((f"{where}.nodePort", "FieldValueInvalid", f"Invalid value: {node_port}: {why}"))
    elif node_port in taken:
        why = "provided port is already allocated"
        causes.append((f"{where}.nodePort", "FieldValueInvalid", f"Invalid value: {node_port}: {why}"))
    return causes


def kubernetes_service(strategy: ServiceStrategy, port: int) -> dict[str, Any]:
    """default/kubernetes as kube-apiserver keeps it: the range's first ClusterIP, 443 to this server."""
    return {
        "kind": "Service",
        "apiVersion": "v1",
        "metadata": {
            "name": KUBERNETES_SERVICE,
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "clusterIP": strategy.first_ip,
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
            "sessionAffinity": "None",
            "type": "ClusterIP",
        },
    }
