"""A container process's environment, resolved as the kubelet resolves it for a container.

Order (later wins, as in the kubelet where the runtime options' env comes first and the
container's own env is appended): a minimal base (PATH, HOSTNAME), the device plugins'
env, then the container's `env` in order. Values may reference earlier variables as
`$(NAME)` (`$$` escapes a `$`), and so may `command` and `args`. `valueFrom.fieldRef`
supports the downward-API fields that make sense for a process; `resourceFieldRef`
resolves limits/requests with the divisor, rounding up, with node allocatable standing
in for an unset limit (as the kubelet does).

ConfigMaps and Secrets (read through agent/util/configobjects.py, only those the pod names): `envFrom`
comes first, each source's keys in order with its `prefix` (keys that are not valid variable names are
skipped, as the kubelet skips them); then `env`, whose `configMapKeyRef` and `secretKeyRef` take one key.
A missing object or key is a ContainerConfigError with the kubelet's text (`configmap "app" not found`,
`couldn't find key k in ConfigMap ns/app`) unless the reference is `optional`, in which case the
variable is left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from agent.util.configobjects import (
    CONFIGMAPS,
    NO_OBJECTS,
    ConfigLookupError,
    ConfigObject,
    ConfigObjects,
    not_found,
)
from kubenode.model import Container, EnvVar, Pod
from kubenode.model.quantity import QuantityError, to_amount

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_LABEL_REF = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


class ContainerConfigError(ValueError):
    """The container's env cannot be resolved (the kubelet's CreateContainerConfigError)."""


@dataclass(frozen=True)
class HostInfo:
    node_name: str
    host_ip: str = "127.0.0.1"
    pod_ip: str = "127.0.0.1"  # processes share the host network
    allocatable: Mapping[str, int] | None = None


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


def _object(
    pod: Pod, resource: str, name: str, optional: bool, objects: ConfigObjects
) -> ConfigObject | None:
    try:
        obj = objects.get(resource, pod.namespace, name)
    except ConfigLookupError as exc:
        raise ContainerConfigError(str(exc)) from None
    if obj is None and not optional:
        raise ContainerConfigError(not_found(resource, name))
    return obj


def _key_value(pod: Pod, ref: tuple[str, str, str, bool], objects: ConfigObjects) -> str | None:
    resource, name, key, optional = ref
    obj = _object(pod, resource, name, optional, objects)
    if obj is None:
        return None
    if key not in obj.data:
        if optional:
            return None
        kind = "ConfigMap" if resource == CONFIGMAPS else "Secret"
        raise ContainerConfigError(f"couldn't find key {key} in {kind} {pod.namespace}/{name}")
    return obj.data[key].decode("utf-8", "replace")


def _env_from(pod: Pod, container: Container, objects: ConfigObjects) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in container.env_from:
        obj = _object(pod, source.resource, source.name, source.optional, objects)
        for key, value in (obj.data if obj is not None else {}).items():
            name = source.prefix + key
            if _ENV_NAME.fullmatch(name):
                env[name] = value.decode("utf-8", "replace")
    return env


def _value(pod: Pod, container: Container, var: EnvVar, env: Mapping[str, str], host: HostInfo) -> str:
    if var.field_path is not None:
        return field_value(pod, var.field_path, host)
    if var.resource_field is not None:
        return resource_value(pod, container, var.resource_field, host)
    return expand(var.value, env)


def container_env(
    pod: Pod,
    container: Container,
    host: HostInfo,
    device_env: Mapping[str, str] | None = None,
    objects: ConfigObjects = NO_OBJECTS,
) -> dict[str, str]:
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": pod.name}
    env.update(device_env or {})
    env.update(_env_from(pod, container, objects))
    for var in container.env:
        if var.key_ref is not None:
            value = _key_value(pod, var.key_ref, objects)
            if value is not None:
                env[var.name] = value
            continue
        try:
            env[var.name] = _value(pod, container, var, env, host)
        except ContainerConfigError as exc:
            raise ContainerConfigError(f"container {container.name} env {var.name}: {exc}") from None
    return env


def container_argv(container: Container, env: Mapping[str, str]) -> list[str]:
    """command + args with $(VAR) expanded; empty when there is nothing to run."""
    return [expand(part, env) for part in (*container.command, *container.args)]
