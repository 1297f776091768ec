"""What the agent applies to a container: the merge of every resource's ContainerAllocateResponse, typed
(agent/container/resources.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TypeVar

from agent.container.resources import ContainerResources, DeviceSpec, Mount
from kubenode.api.deviceplugin.v1beta1 import api_pb2

log = logging.getLogger(__name__)
T = TypeVar("T")


def merge_responses(responses: Iterable[tuple[str, api_pb2.ContainerAllocateResponse]]) -> ContainerResources:
    """Merge (resource, response) pairs like the kubelet: the first value wins, conflicts are only logged.

    Env and annotation keys, and mount and device container paths, are the keys compared; CDI names are
    de-duplicated keeping the first occurrence.
    """
    envs: dict[str, str] = {}
    annotations: dict[str, str] = {}
    mounts: dict[str, Mount] = {}
    devices: dict[str, DeviceSpec] = {}
    cdi: dict[str, None] = {}
    for resource, response in responses:
        _merge_map(envs, response.envs, resource, "env")
        _merge_map(annotations, response.annotations, resource, "annotation")
        for m in response.mounts:
            _keep_first(mounts, m.container_path, Mount(m.container_path, m.host_path, m.read_only), resource)
        for d in response.devices:
            spec = DeviceSpec(d.container_path, d.host_path, d.permissions)
            _keep_first(devices, d.container_path, spec, resource)
        for c in response.cdi_devices:
            cdi.setdefault(c.name, None)
    return ContainerResources(envs, list(mounts.values()), list(devices.values()), annotations, list(cdi))


def _merge_map(into: dict[str, str], values: Mapping[str, str], resource: str, what: str) -> None:
    for key, value in values.items():
        _keep_first(into, key, value, resource, what)


def _keep_first(into: dict[str, T], key: str, value: T, resource: str, what: str = "container path") -> None:
    existing = into.get(key)
    if existing is None:
        into[key] = value
    elif existing != value:
        log.warning("%s %s from %s conflicts with an earlier value; keeping the first", what, key, resource)
