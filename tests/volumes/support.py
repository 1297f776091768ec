"""A ConfigMap/Secret store in memory, with the ConfigObjects interface the agent reads through."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from agent.util.configobjects import CONFIGMAPS, SECRETS, ConfigObject
from agent.volumemanager import mountutil


class FakeObjects:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str, str], ConfigObject] = {}
        self.reads: list[tuple[str, str, str]] = []

    def put(
        self, resource: str, name: str, data: Mapping[str, str | bytes], namespace: str = "default"
    ) -> None:
        encoded = {k: v.encode() if isinstance(v, str) else v for k, v in data.items()}
        with self._lock:
            self._objects[(resource, namespace, name)] = ConfigObject(resource, namespace, name, encoded)

    def configmap(self, name: str, data: Mapping[str, str | bytes]) -> None:
        self.put(CONFIGMAPS, name, data)

    def secret(self, name: str, data: Mapping[str, str | bytes]) -> None:
        self.put(SECRETS, name, data)

    def forget_except(self, wanted: set[tuple[str, str, str]]) -> None:
        pass

    def get(self, resource: str, namespace: str, name: str) -> ConfigObject | None:
        with self._lock:
            self.reads.append((resource, namespace, name))
            return self._objects.get((resource, namespace, name))


def mounts_below(path: str) -> list[str]:
    return [m for m in mountutil.mount_points() if m.startswith(path.rstrip("/") + "/") or m == path]
