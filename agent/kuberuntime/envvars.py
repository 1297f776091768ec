"""A container process's environment, resolved as the kubelet resolves it for a container.

Order (later wins, as in the kubelet where the runtime options' env comes first and the
container's own env is appended): a minimal base (PATH, HOSTNAME), the `default/kubernetes` Service's
variables (KUBERNETES_SERVICE_HOST/PORT and the docker-link ones, which in-cluster clients read: the
API server's address, as the node reaches it), the device plugins' env, then the container's `env` in
order. Values may reference earlier variables as
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

import re
from collections.abc import Mapping

from agent.container.downwardapi import ContainerConfigError, HostInfo, expand, field_value, resource_value
from agent.util.configobjects import (
    CONFIGMAPS,
    NO_OBJECTS,
    ConfigLookupError,
    ConfigObject,
    ConfigObjects,
    not_found,
)
from kubenode.model import Container, EnvVar, Pod

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


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


def kubernetes_service_env(host: str, port: int) -> dict[str, str]:
    """The kubelet's env for the master Service (named port `https`), pointed at the API server itself."""
    url = f"tcp://{host}:{port}"
    prefix = f"KUBERNETES_PORT_{port}_TCP"
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": url,
        prefix: url,
        f"{prefix}_PROTO": "tcp",
        f"{prefix}_PORT": str(port),
        f"{prefix}_ADDR": host,
    }


def container_env(
    pod: Pod,
    container: Container,
    host: HostInfo,
    device_env: Mapping[str, str] | None = None,
    objects: ConfigObjects = NO_OBJECTS,
) -> dict[str, str]:
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": pod.name}
    if host.api_endpoint is not None:
        env.update(kubernetes_service_env(*host.api_endpoint))
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
