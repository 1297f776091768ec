"""Building the authenticated daemon endpoint for an agent that joins a cluster.

    the node's addresses (nodeIp or the default route's, the hostname, the secure listen host) -> the
    serving certificate (agent/certificate/servingcert.py) -> the client CA: the cluster CA from the
    agent's kubeconfig (or service account) -> SecureServer (server.py) with SubjectAccessReviews through
    the agent's API client, container logs, and exec resolved against the agent's pods.

Returns None, with one logged line saying why, when no certificate can be had: the agent still runs its
pods and reports its node, but the API server cannot reach its logs or exec.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import Any

import psutil

from agent.apis.config import AgentConfig, parse_listen
from agent.kuberuntime.envvars import ContainerConfigError
from agent.kuberuntime.execstream import ExecSpec, exec_spec
from agent.node import NodeAgent
from agent.pod.podrecord import RUNNING
from agent.server.auth import Authorizer, subject_access_review
from agent.server.containerlogs import ContainerLogs
from agent.server.portforward import PortCheck
from agent.server.server import SecureServer, server_tls

log = logging.getLogger(__name__)


def secure_address(config: AgentConfig) -> tuple[str, int]:
    if config.secure_listen:
        return parse_listen(config.secure_listen, key="secureListen")
    host = parse_listen(config.listen)[0] if config.listen else "127.0.0.1"
    return host, 0


def exec_resolver(agent: NodeAgent) -> Any:
    def find(namespace: str, name: str, container: str, command: list[str]) -> ExecSpec | tuple[int, str]:
        for view in agent.pods():
            pod = view.pod
            if pod is None or pod.namespace != namespace or pod.name != name:
                continue
            record = view.record.containers.get(container)
            if not any(c.name == container for c in pod.all_containers):
                return 404, f'container "{container}" in pod "{name}" not found'
            if record is None or record.state != RUNNING:
                state = record.state if record is not None else "not started"
                return 400, f'container "{container}" in pod "{name}" is not running ({state})'
            try:
                return exec_spec(pod, container, command, agent.cgroups.procs_files(pod), agent.host)
            except ContainerConfigError as exc:
                return 400, str(exc)
        return 404, f'pod "{name}" in namespace "{namespace}" not found on node {agent.config.node_name}'

    async def resolve(
        namespace: str, name: str, container: str, command: list[str]
    ) -> ExecSpec | tuple[int, str]:
        return await asyncio.get_running_loop().run_in_executor(
            None, find, namespace, name, container, command
        )

    return resolve


def listening_ports(pids: set[int]) -> set[int]:
    """The TCP ports the given processes listen on."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return set()
    return {c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN and c.pid in pids and c.laddr}


def declared_ports(raw: Any) -> set[int]:
    """containerPort of every container's `ports` in a pod document."""
    spec = raw.get("spec") or {} if isinstance(raw, dict) else {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    return {
        int(p["containerPort"])
        for c in containers
        for p in c.get("ports") or []
        if isinstance(p, dict) and str(p.get("containerPort", "")).isdigit()
    }


def port_check(agent: NodeAgent, name: str, uid: str, declared: set[int]) -> PortCheck:
    def refusal(port: int) -> str | None:
        if port in declared or port in listening_ports(agent.cgroups.pids(uid)):
            return None
        return (
            f"error forwarding port {port} to pod {name}: the pod declares no such port"
            " and none of its processes listens on it"
        )

    async def check(port: int) -> str | None:
        return await asyncio.get_running_loop().run_in_executor(None, refusal, port)

    return check


def pod_resolver(agent: NodeAgent) -> Any:
    def find(namespace: str, name: str) -> PortCheck | tuple[int, str]:
        for view in agent.pods():
            pod = view.pod
            if pod is None or pod.namespace != namespace or pod.name != name:
                continue
            if view.record.phase != "Running":
                return 400, f'pod "{name}" is not running (phase {view.record.phase}): cannot forward ports'
            return port_check(agent, name, pod.uid, declared_ports(pod.raw))
        return 404, f'pod "{name}" in namespace "{namespace}" not found on node {agent.config.node_name}'

    async def resolve(namespace: str, name: str) -> PortCheck | tuple[int, str]:
        return await asyncio.get_running_loop().run_in_executor(None, find, namespace, name)

    return resolve


def build_secure_server(
    config: AgentConfig, agent: NodeAgent, client: Any, node_ip: str
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
    return SecureServer(
        host,
        port,
        tls,
        config.node_name,
        Authorizer(subject_access_review(client, config.node_name)),
        pods=agent.status_json,
        container_logs=ContainerLogs(agent.status_json).route,
        resolve_exec=exec_resolver(agent),
        resolve_pod=pod_resolver(agent),
    )
