"""Building the authenticated daemon endpoint for an agent that joins a cluster.

    the node's addresses (nodeIp or the default route's, the hostname, the secure listen host) -> the
    serving certificate (agent/certificate/servingcert.py) -> the client CA: the cluster CA from the
    agent's kubeconfig (or service account) -> SecureServer (server.py) with SubjectAccessReviews through
    the agent's API client, container logs, and exec, attach and port-forward resolved against the agent's
pods (podtargets.py).

Returns None, with one logged line saying why, when no certificate can be had: the agent still runs its
pods and reports its node, but the API server cannot reach its logs or exec.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent.apis.config import AgentConfig, parse_listen
from agent.node import NodeAgent
from agent.server.auth import Authorizer, subject_access_review
from agent.server.containerlogs import ContainerLogs
from agent.server.podtargets import PodTargets
from agent.server.server import SecureServer, server_tls

log = logging.getLogger(__name__)


def secure_address(config: AgentConfig) -> tuple[str, int]:
    if config.secure_listen:
        return parse_listen(config.secure_listen, key="secureListen")
    host = parse_listen(config.listen)[0] if config.listen else "127.0.0.1"
    return host, 0


def build_secure_server(
    config: AgentConfig,
    agent: NodeAgent,
    client: Any,
    node_ip: str,
    reads: Mapping[str, Callable[[], tuple[int, str, bytes]]] | None = None,
) -> SecureServer | None:
    from agent.certificate.servingcert import ServingCertError, ensure_serving_cert
    from kubenode.kubeclient import KubeError, load_incluster, load_kubeconfig

    host, port = secure_address(config)
    names = {node_ip, socket.gethostname(), host, "127.0.0.1"} - {"0.0.0.0", "::", ""}
    try:
        client_config = load_incluster() if config.in_cluster else load_kubeconfig(config.kubeconfig or "")
        if not client_config.ca_file:
            raise ServingCertError("the kubeconfig names no certificate-authority to verify callers with")
        cert = ensure_serving_cert(client, config.node_name, names, config.state_dir)
        tls = server_tls(cert.cert_path, cert.key_path, Path(client_config.ca_file))
    except (ServingCertError, KubeError, OSError, ValueError) as exc:
        log.warning("the authenticated daemon endpoint (logs, exec) is not served: %s", exc)
        return None
    targets = PodTargets(agent)
    return SecureServer(
        host,
        port,
        tls,
        config.node_name,
        Authorizer(subject_access_review(client, config.node_name)),
        pods=agent.status_json,
        # CRI pods log in the CRI format under podLogsDir: lines are unwrapped for kubectl logs.
        container_logs=ContainerLogs(
            agent.status_json, config.pod_logs_dir if config.container_runtime_endpoint else None
        ).route,
        resolve_exec=targets.exec,
        resolve_pod=targets.port_forward,
        resolve_attach=targets.attach,
        reads=reads,
    )
