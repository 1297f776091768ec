"""Which pod holds which device, and which pod a GPU process belongs to, for per-pod GPU metrics.

Devices: the PodResources API's `List` (our agent's socket, or a kubelet's), as dcgm-exporter reads
it: every container device of our resource, replica suffixes `::N` stripped. Processes (shared GPUs,
where several pods hold one GPU): the pod UID in `/proc/<pid>/cgroup` (`pod<uid>` on cgroupfs,
`-pod<uid_with_underscores>.slice` on systemd), and the pod's namespace and name from its log
directory `<pod logs dir>/<namespace>_<name>_<uid>`, which the kubelet and our agent both make.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PODRESOURCES_TIMEOUT_S = 2.0  # a scrape must not hang on a stuck kubelet
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass(frozen=True)
class Holder:
    namespace: str
    pod: str
    container: str


class PodResourcesClient:
    """PodResources `List` over one channel kept across scrapes (a new connection per scrape costs more
    than the call); the channel is made again after a failure, e.g. a restarted kubelet."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self._channel: Any = None
        self._stub: Any = None

    def device_holders(self, resource_name: str) -> dict[str, list[Holder]] | None:
        """Device ID -> the containers holding it; None when PodResources is unreachable."""
        if not os.path.exists(self.socket_path):
            return None
        import grpc

        from kubenode.api.podresources.v1 import api_pb2, api_pb2_grpc

        if self._stub is None:
            self._channel = grpc.insecure_channel(f"unix://{self.socket_path}")
            self._stub = api_pb2_grpc.PodResourcesListerStub(self._channel)
        try:
            response = self._stub.List(api_pb2.ListPodResourcesRequest(), timeout=PODRESOURCES_TIMEOUT_S)
        except grpc.RpcError as exc:
            log.debug("PodResources List at %s failed: %s", self.socket_path, exc)
            self.close()
            return None
        return _holders(response, resource_name)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = self._stub = None


def _holders(response: Any, resource_name: str) -> dict[str, list[Holder]]:
    holders: dict[str, list[Holder]] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                if devices.resource_name != resource_name:
                    continue
                for device_id in devices.device_ids:
                    holder = Holder(pod.namespace, pod.name, container.name)
                    found = holders.setdefault(device_id.split("::")[0], [])
                    if holder not in found:
                        found.append(holder)
    return holders


def pod_uid_of(pid: int, proc_root: str = "/proc") -> str | None:
    """The pod UID in a process's cgroup path, or None (not a pod's process, or gone)."""
    try:
        text = Path(proc_root, str(pid), "cgroup").read_text()
    except OSError:
        return None
    match = _POD_UID.search(text)
    return match.group(1).replace("_", "-") if match else None


def pods_by_uid(pod_logs_dir: str) -> dict[str, tuple[str, str]]:
    """Pod UID -> (namespace, name), from the directory names `<namespace>_<name>_<uid>`."""
    result: dict[str, tuple[str, str]] = {}
    try:
        names = os.listdir(pod_logs_dir)
    except OSError:
        return result
    for name in names:
        parts = name.split("_")
        if len(parts) == 3:  # namespaces and pod names cannot hold '_'
            result[parts[2]] = (parts[0], parts[1])
    return result
