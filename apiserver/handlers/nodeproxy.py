"""Reaching a pod's node for the proxied subresources (pods/log, exec, attach, portforward), as
kube-apiserver's kubelet client does.

    the pod (404) -> its node (400 "does not have a host assigned" while unbound) -> the container (the
    only one, or ?container=; 400 naming the choices) -> the Node's address (status.addresses: InternalIP,
    then Hostname) and daemonEndpoints.kubeletEndpoint.Port -> https://<address>:<port>/<path>

The connection is TLS both ways: this server presents its kubelet client certificate
(`<data-dir>/pki/apiserver-kubelet-client.crt`, as kube-apiserver's --kubelet-client-certificate) and checks
the agent's serving certificate against the cluster CA and the address it dialled (as
--kubelet-certificate-authority does), so neither side can be impersonated and nothing on the wire can be
replayed.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from apiserver.auth.pki import ClientCert
from apiserver.handlers.common import ApiContext
from apiserver.handlers.writes import load
from apiserver.request import RequestInfo
from apiserver.status import APIError, bad_request, not_found
from kubenode.nodeendpoints import node_daemon_endpoint

DIALER_KEY = "node_dialer"  # ctx.extras: the NodeDialer made at start
CONNECT_TIMEOUT_S = 10.0


class NodeDialer:
    """The TLS client context for agents' daemon endpoints."""

    def __init__(self, cert: ClientCert) -> None:
        self.ssl = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(cert.ca_path))
        self.ssl.load_cert_chain(str(cert.cert_path), str(cert.key_path))


@dataclass(frozen=True)
class Target:
    pod: dict[str, Any]
    node: str
    container: str
    base_url: str  # https://<address>:<port>
    dialer: NodeDialer


def pick_container(pod: dict[str, Any], name: str, requested: str | None) -> str:
    spec = pod.get("spec") or {}
    containers = [c.get("name") for c in spec.get("containers") or []]
    init = [c.get("name") for c in spec.get("initContainers") or []]
    if requested:
        if requested not in containers and requested not in init:
            raise bad_request(f"container {requested} is not valid for pod {name}")
        return requested
    if len(containers) == 1:
        return str(containers[0])
    choices = " ".join(str(c) for c in containers)
    raise bad_request(f"a container name must be specified for pod {name}, choose one of: [{choices}]")


def locate(ctx: ApiContext, info: RequestInfo, container: str | None, *, what: str) -> Target:
    """The pod's node and its daemon endpoint; `what` names the errand in errors ("read logs from")."""
    entry = ctx.store.get("pods", info.namespace, info.name)
    if entry is None:
        raise not_found("pods", info.name)
    pod = load(entry)
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        raise bad_request(f"pod {info.name} does not have a host assigned")
    chosen = pick_container(pod, info.name, container) if container is not None else ""
    node_entry = ctx.store.get("nodes", "", node_name)
    address = node_daemon_endpoint(load(node_entry)) if node_entry is not None else None
    if address is None:
        raise bad_request(f"node {node_name} reports no daemon endpoint to {what}")
    dialer: NodeDialer | None = ctx.extras.get(DIALER_KEY)
    if dialer is None:
        raise APIError(503, "ServiceUnavailable", "this server has no client certificate to reach nodes with")
    return Target(pod, str(node_name), chosen, f"https://{address}", dialer)


def upstream_error(url: str, exc: BaseException) -> APIError:
    return APIError(500, "InternalError", f'Get "{url}": {exc}', {"causes": [{"message": str(exc)}]})


def agent_error(code: int, text: str) -> APIError:
    """The agent's plain-text refusal as a Status with its code (400 and 404 kept, the rest 500)."""
    kept = code if code in (400, 404) else 500
    reason = "BadRequest" if kept == 400 else "NotFound" if kept == 404 else "InternalError"
    return APIError(kept, reason, text.strip())
