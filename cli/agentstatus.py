"""The agent's status endpoint as `kubenode up` and `kubenode trace` read it: its address from the Node
(status.addresses and the status-port annotation: kubenode/nodeendpoints.py) and its
`/pods` JSON (the pods with their cgroup, cpuset, limits read from the cgroup files, and devices)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from kubenode.kubeclient import NODES, KubeClient
from kubenode.nodeendpoints import node_status_endpoint


def endpoint_of(client: KubeClient, node_name: str) -> str | None:
    return node_status_endpoint(client.get(NODES, node_name))


def agent_pods(address: str, timeout: float = 5.0) -> dict[str, Any]:
    """The agent's /pods (every page)."""
    items: list[Any] = []
    token = ""
    while True:
        url = f"http://{address}/pods" + (f"?continue={token}" if token else "")
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            page: dict[str, Any] = json.loads(answer.read())
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            page["items"] = items
            return page
