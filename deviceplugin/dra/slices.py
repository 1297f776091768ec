"""The driver's ResourceSlice for this node: one pool per driver, named after the node.

`publish(devices)` writes `<node>-<driver>` (dots as dashes) with `spec.driver`, `spec.nodeName`, the pool
`{name: <node>, generation, resourceSliceCount: 1}` and the healthy devices; an unhealthy device is left
out. Each publish that changes the device list raises the pool's generation (the scheduler trusts only the
newest generation of a pool). The driver writes only this slice (a node's credentials allow only its own).
The slice is found by a list with `fieldSelector=spec.nodeName=<node>`, as the kubelet plugin library's
slice controller does: kube-apiserver's Node authorizer lets a node GET (or delete) only a slice already
linked to it, so a GET of one not made yet is 403, not 404, while a list scoped to the node is allowed.
An API server that does not serve resource.k8s.io/v1 answers 404: the error is raised, the caller retries.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from deviceplugin.dra.inventory import DraDevice
from kubenode.kubeclient import RESOURCE_SLICES, Forbidden, KubeClient, NotFound

log = logging.getLogger(__name__)


def slice_name(node: str, driver: str) -> str:
    return f"{node}-{driver.replace('.', '-')}"


class SlicePublisher:
    def __init__(self, client: KubeClient, node: str, driver: str) -> None:
        self.client = client
        self.node = node
        self.driver = driver
        self.name = slice_name(node, driver)
        self._published: list[dict[str, Any]] | None = None

    def body(
        self, devices: list[dict[str, Any]], generation: int, resource_version: str = ""
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": RESOURCE_SLICES.api_version,
            "kind": RESOURCE_SLICES.kind,
            "metadata": metadata,
            "spec": {
                "driver": self.driver,
                "nodeName": self.node,
                "pool": {"name": self.node, "generation": generation, "resourceSliceCount": 1},
                "devices": devices,
            },
        }

    def publish(self, devices: Sequence[DraDevice]) -> bool:
        """Make the slice hold the healthy devices; True when it was written."""
        entries = [d.slice_entry() for d in devices if d.healthy]
        if entries == self._published:
            return False
        current = self.current()
        if current is None:
            self.client.create(RESOURCE_SLICES, self.body(entries, 1))
            log.info("published ResourceSlice %s: %d devices, generation 1", self.name, len(entries))
        else:
            spec = current.get("spec") or {}
            if spec.get("devices") == entries and spec.get("nodeName") == self.node:
                self._published = entries
                return False
            generation = int((spec.get("pool") or {}).get("generation") or 0) + 1
            rv = str((current.get("metadata") or {}).get("resourceVersion") or "")
            self.client.update(RESOURCE_SLICES, self.body(entries, generation, rv))
            log.info(
                "updated ResourceSlice %s: %d devices, generation %d", self.name, len(entries), generation
            )
        self._published = entries
        return True

    def current(self) -> dict[str, Any] | None:
        """The slice as stored, or None when there is none (a 404 for the group itself is raised)."""
        listed = self.client.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={self.node}")
        for item in listed.get("items") or []:
            if (item.get("metadata") or {}).get("name") == self.name:
                return dict(item)
        return None

    def withdraw(self) -> None:
        # Forbidden: the Node authorizer's answer for a slice not (or no longer) linked to this node.
        with contextlib.suppress(NotFound, Forbidden):
            self.client.delete(RESOURCE_SLICES, self.name)
        self._published = None
