"""The files of a configMap, secret, downwardAPI or projected volume: its payload for the atomic writer.

As the kubelet's plugins compute them (pkg/volume/configmap, secret, downwardapi, projected): every key
of the object at a path of its own name with the volume's defaultMode, or only the `items` asked for,
each at its `path` with its `mode` if given. A missing object fails the volume unless `optional`; a
missing key of `items` fails it unless the source is optional, with the kubelet's messages. downwardAPI
files hold one field each; `metadata.labels` and `metadata.annotations` list every `key="value"`, sorted.
A projected volume's serviceAccountToken source is a token bound to the pod, for its audience (none: the
API server's) and lifetime, from the token manager (agent/token/), written with the volume's defaultMode.
The sources of a projected volume are merged in order.
"""

from __future__ import annotations

import json

from agent.container.downwardapi import ContainerConfigError, HostInfo, field_value, resource_value
from agent.token.manager import TokenError, TokenManager, TokenSpec
from agent.util.configobjects import CONFIGMAPS, SECRETS, ConfigObjects, not_found
from agent.volumemanager.atomicwriter import FileProjection
from kubenode.model import Pod
from kubenode.model.objects import CONFIG_MAP, DOWNWARD_API, SERVICE_ACCOUNT_TOKEN, Projection, Volume


class ProjectionError(Exception):
    """The payload cannot be made; the message is the reason the FailedMount event gives."""


def _downward_text(pod: Pod, field_path: str, host: HostInfo) -> str:
    if field_path in ("metadata.labels", "metadata.annotations"):
        values = pod.labels if field_path == "metadata.labels" else pod.annotations
        # Go's %q quoting, as the kubelet's FormatMap; JSON's string escaping matches it for text.
        return "\n".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(values.items()))
    return field_value(pod, field_path, host)


def _downward(pod: Pod, source: Projection, default_mode: int, host: HostInfo) -> dict[str, FileProjection]:
    files = {}
    for item in source.items:
        try:
            if item.field_path is not None:
                text = _downward_text(pod, item.field_path, host)
            elif item.resource_field is not None:
                text = resource_value(pod, pod.containers[0], item.resource_field, host)
            else:
                continue
        except ContainerConfigError as exc:
            raise ProjectionError(str(exc)) from None
        files[item.path] = FileProjection(text.encode(), default_mode if item.mode is None else item.mode)
    return files


def _config(
    pod: Pod, source: Projection, default_mode: int, objects: ConfigObjects
) -> dict[str, FileProjection]:
    resource = CONFIGMAPS if source.kind == CONFIG_MAP else SECRETS
    obj = objects.get(resource, pod.namespace, source.name)
    if obj is None:
        if source.optional:
            return {}
        raise ProjectionError(not_found(resource, source.name))
    if not source.items:
        return {key: FileProjection(value, default_mode) for key, value in obj.data.items()}
    files = {}
    for item in source.items:
        if item.key not in obj.data:
            if source.optional:
                continue
            if resource == CONFIGMAPS:
                raise ProjectionError(f"configmap references non-existent config key: {item.key}")
            raise ProjectionError(f"references non-existent secret key: {item.key}")
        files[item.path] = FileProjection(
            obj.data[item.key], default_mode if item.mode is None else item.mode
        )
    return files


def service_account_name(pod: Pod) -> str:
    """The pod's ServiceAccount (the API server's admission set it; `default` as kube reads an empty one)."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    name = spec.get("serviceAccountName") or spec.get("serviceAccount") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else "default"


def _token(
    pod: Pod, source: Projection, default_mode: int, tokens: TokenManager | None
) -> dict[str, FileProjection]:
    if tokens is None:
        raise ProjectionError(
            "no API server to request a ServiceAccount token from (the agent joined no cluster)"
        )
    audiences = (source.audience,) if source.audience else ()
    spec = TokenSpec(audiences, source.expiration_seconds, pod.name, pod.uid)
    try:
        token = tokens.get(pod.namespace, service_account_name(pod), spec)
    except TokenError as exc:
        raise ProjectionError(str(exc)) from None
    return {source.items[0].path: FileProjection(token.encode(), default_mode)}


def volume_payload(
    pod: Pod, volume: Volume, objects: ConfigObjects, host: HostInfo, tokens: TokenManager | None = None
) -> dict[str, FileProjection]:
    payload: dict[str, FileProjection] = {}
    for source in volume.projections:
        if source.kind == DOWNWARD_API:
            payload.update(_downward(pod, source, volume.default_mode, host))
        elif source.kind == SERVICE_ACCOUNT_TOKEN:
            payload.update(_token(pod, source, volume.default_mode, tokens))
        else:
            payload.update(_config(pod, source, volume.default_mode, objects))
    return payload
