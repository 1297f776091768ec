"""The downward API as a container sees it: the pod's fields and resources resolved to text.

Shared by the env (agent/kuberuntime/envvars.py) and the downwardAPI and projected volumes
(agent/volumemanager/projection.py): a `fieldRef` names a pod field (`metadata.name|namespace|uid`,
`metadata.labels['k']|annotations['k']`, `spec.nodeName`, `status.podIP`/`hostIP`), a `resourceFieldRef` a
container's limit or request with a divisor, rounded up, node allocatable standing in for an unset limit
(as the kubelet does). `expand` is Kubernetes' `$(VAR)` expansion.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kubenode.model import Container, Pod
from kubenode.model.quantity import QuantityError, to_amount

_REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
_LABEL_REF = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


class ContainerConfigError(ValueError):
    """The container's env cannot be resolved (the kubelet's CreateContainerConfigError)."""


@dataclass(frozen=True)
class HostInfo:
    node_name: str
    host_ip: str = "127.0.0.1"
    pod_ip: str = "127.0.0.1"  # processes share the host network
    allocatable: Mapping[str, int] | None = None
    # The API server as pods reach it (KUBERNETES_SERVICE_HOST/PORT): its address in the agent's kubeconfig,
    # which is what default/kubernetes's endpoints name (there is no Service proxy here); None: no cluster.
    api_endpoint: tuple[str, int] | None = None


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes $(VAR) expansion: known names are replaced, unknown ones kept, `$$` becomes `$`."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _REFERENCE.sub(substitute, text)


def field_value(pod: Pod, path: str, host: HostInfo) -> str:
    simple = {
        "metadata.name": pod.name,
        "metadata.namespace": pod.namespace,
        "metadata.uid": pod.uid,
        "spec.nodeName": pod.node_name or host.node_name,
        "spec.serviceAccountName": "",
        "status.podIP": host.pod_ip,
        "status.podIPs": host.pod_ip,
        "status.hostIP": host.host_ip,
        "status.hostIPs": host.host_ip,
    }
    if path in simple:
        return simple[path]
    match = _LABEL_REF.match(path)
    if match:
        source = pod.labels if match.group(1) == "labels" else pod.annotations
        return source.get(match.group(2), "")
    raise ContainerConfigError(f"unsupported fieldRef.fieldPath {path!r}")


def resource_value(pod: Pod, container: Container, ref: tuple[str, str, str], host: HostInfo) -> str:
    container_name, resource, divisor_text = ref
    target = container
    if container_name:
        found = [c for c in pod.all_containers if c.name == container_name]
        if not found:
            raise ContainerConfigError(f"resourceFieldRef names unknown container {container_name!r}")
        target = found[0]
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or not name:
        raise ContainerConfigError(f"unsupported resourceFieldRef.resource {resource!r}")
    amounts = target.limits if kind == "limits" else target.requests
    amount = amounts.get(name)
    if amount is None and kind == "limits" and host.allocatable is not None:
        amount = host.allocatable.get(name)
    try:
        divisor = to_amount(name, divisor_text or "1")
    except QuantityError as exc:
        raise ContainerConfigError(f"resourceFieldRef.divisor: {exc}") from None
    if divisor <= 0:
        raise ContainerConfigError(f"resourceFieldRef.divisor must be positive, got {divisor_text!r}")
    return str(math.ceil((amount or 0) / divisor))
