"""The node's heartbeat: Lease kube-node-lease/<node>, held by the node, renewed every 10 s for 40 s.

As the kubelet's lease controller: leaseDurationSeconds 40, renewed every 0.25 x 40 = 10 s with
4 % jitter, create-or-renew by PUT with resourceVersion (a GET only first and after a failure),
retries 200 ms doubling to 7 s after a failure, and an owner reference to the Node once its uid
is known (so the Lease goes when the Node is deleted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.apis.config import AgentConfig
from kubenode.kubeclient import KubeClient
from kubenode.kubeclient.lease import LeaseRenewer

NODE_LEASE_NAMESPACE = "kube-node-lease"


def node_lease(client: KubeClient, config: AgentConfig, node_uid: Callable[[], str]) -> LeaseRenewer:
    def owner() -> list[dict[str, Any]] | None:
        uid = node_uid()
        if not uid:
            return None
        return [{"apiVersion": "v1", "kind": "Node", "name": config.node_name, "uid": uid}]

    return LeaseRenewer(
        client,
        NODE_LEASE_NAMESPACE,
        config.node_name,
        config.node_name,
        duration_s=config.node_lease_duration_seconds,
        interval=config.node_lease_renew_interval,
        owner_references=owner,
        retry_max=min(7.0, config.api_backoff_max),
    )
