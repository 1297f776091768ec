"""Building the authenticated daemon endpoint for an agent that joins a cluster.

    the node's addresses (nodeIp or the default route's, the hostname, the secure listen host) -> the
    serving certificate (agent/certificate/servingcert.py) -> the client CA: the cluster CA from the
    agent's kubeconfig (or service account) -> the listening socket (lazysecure.py), on whose first
    connection SecureServer (server.py) is built, with SubjectAccessReviews through the agent's API
    client, container logs, and exec, attach and port-forward resolved against the agent's pods
    (podtargets.py). Nothing here imports aiohttp: only that first connection does.

The socket is bound at once (the Node names its port); the certificate is asked for on the endpoint's
own thread (lazysecure.py `prepare`), so the agent registers its Node and runs its pods while a CSR waits
for approval, up to SERVING_CERT_WAIT_S. Returns None, with one logged line saying why, when the kubeconfig
names no CA; a certificate that never comes is one logged line too, and the endpoint stays off: the agent
still runs its pods and reports its node, but the API server cannot reach its logs or exec.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.apis.config import AgentConfig, parse_listen
from agent.node import NodeAgent
from agent.server.auth import Authorizer, subject_access_review
from agent.server.containerlogs import ContainerLogs
from agent.server.lazysecure import LazySecureServer

if TYPE_CHECKING:
    from agent.server.server import SecureServer

log = logging.getLogger(__name__)

# How long a kubelet-serving CSR may wait for its approval: the kubelet's certificateWaitTimeout.
SERVING_CERT_WAIT_S = 15 * 60.0


def secure_address(config: AgentConfig) -> tuple[str, int]:
    if config.secure_listen:
        return parse_listen(config.secure_listen, key="secureListen")
    host = parse_listen(config.listen)[0] if config.listen else "127.0.0.1"
    return host, 0


def server_tls(cert: Path, key: Path, client_ca: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(client_ca))
    context.load_cert_chain(str(cert), str(key))
    context.verify_mode = ssl.CERT_OPTIONAL  # no certificate is a 401 from us, not a TLS alert
    return context


def build_secure_server(
    config: AgentConfig,
    agent: NodeAgent,
    client: Any,
    node_ip: str,
    reads: Mapping[str, Callable[[], tuple[int, str, bytes]]] | None = None,
) -> LazySecureServer | None:
    from agent.certificate.servingcert import ServingCertError, ensure_serving_cert
    from kubenode.kubeclient import KubeError, load_incluster, load_kubeconfig

    host, port = secure_address(config)
    names = {node_ip, socket.gethostname(), host, "127.0.0.1"} - {"0.0.0.0", "::", ""}
    try:
        client_config = load_incluster() if config.in_cluster else load_kubeconfig(config.kubeconfig or "")
        if not client_config.ca_file:
            raise ServingCertError("the kubeconfig names no certificate-authority to verify callers with")
    except (ServingCertError, KubeError, OSError, ValueError) as exc:
        log.warning("the authenticated daemon endpoint (logs, exec) is not served: %s", exc)
        return None
    client_ca = Path(client_config.ca_file)
    tls: list[ssl.SSLContext] = []

    def certificate(stopping: threading.Event) -> bool:
        """The serving certificate, on the endpoint's own thread: a kubelet-serving CSR may wait minutes
        for someone's approval (kube-controller-manager approves none), and the agent must not."""

        def sleep(seconds: float) -> None:
            if stopping.wait(seconds):
                raise ServingCertError("the agent is stopping")

        try:
            cert = ensure_serving_cert(
                client, config.node_name, names, config.state_dir, wait_s=SERVING_CERT_WAIT_S, sleep=sleep
            )
            tls.append(server_tls(cert.cert_path, cert.key_path, client_ca))
        except (ServingCertError, KubeError, OSError, ValueError) as exc:
            if not stopping.is_set():
                log.warning("the authenticated daemon endpoint (logs, exec) is not served: %s", exc)
            return False
        return True

    authorizer = Authorizer(subject_access_review(client, config.node_name))
    # CRI pods log in the CRI format under podLogsDir: lines are unwrapped for kubectl logs.
    cri_logs = config.pod_logs_dir if config.container_runtime_endpoint else None
    logs = ContainerLogs(agent.status_json, cri_logs)

    def build(sock: socket.socket) -> SecureServer:
        from agent.server.podtargets import PodTargets
        from agent.server.server import SecureServer

        targets = PodTargets(agent)
        return SecureServer(
            host,
            port,
            tls[0],
            config.node_name,
            authorizer,
            pods=agent.status_json,
            container_logs=logs.route,
            resolve_exec=targets.exec,
            resolve_pod=targets.port_forward,
            resolve_attach=targets.attach,
            reads=reads,
            sock=sock,
        )

    return LazySecureServer(host, port, build, prepare=certificate)
