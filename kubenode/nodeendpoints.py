"""Where an agent's daemon endpoints are, read from its Node as the API server and `kubenode up` find them.

The authenticated endpoint (HTTPS, client certificates; logs, exec) is the Node's
`status.daemonEndpoints.kubeletEndpoint.Port` at its preferred address, as kube-apiserver finds a kubelet.
The agent's plain status endpoint (/pods, /healthz, /metrics for local readers) is published in the
annotation STATUS_PORT_ANNOTATION, which kube does not have (the kubelet's read-only port is not published).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STATUS_PORT_ANNOTATION = "node.kubenode.io/status-port"
ADDRESS_PREFERENCE = ("InternalIP", "ExternalIP", "Hostname")


def node_daemon_endpoint(node: Mapping[str, Any]) -> str | None:
    """host:port of a Node's daemon endpoint (status.addresses by kube's preference, and
    daemonEndpoints.kubeletEndpoint.Port), or None while the node has not reported one."""
    status = node.get("status") or {}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    host = next((addresses[t] for t in ADDRESS_PREFERENCE if addresses.get(t)), None)
    return f"{host}:{port}" if host and port else None


def node_status_endpoint(node: Mapping[str, Any]) -> str | None:
    """host:port of a Node's plain status endpoint (STATUS_PORT_ANNOTATION), or None."""
    port = ((node.get("metadata") or {}).get("annotations") or {}).get(STATUS_PORT_ANNOTATION)
    endpoint = node_daemon_endpoint(node)
    return f"{endpoint.rsplit(':', 1)[0]}:{port}" if endpoint and port else None
