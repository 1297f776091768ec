"""The driver's ResourceSlice publisher against a real `kubenode apiserver` process.

The server serves resource.k8s.io/v1: the slice is created, left alone when nothing changed, rewritten
with the pool's generation raised when a device turns unhealthy, and withdrawn.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, cast

import pytest

from deviceplugin.dra.inventory import DraDevice
from deviceplugin.dra.slices import SlicePublisher, slice_name
from kubenode.kubeclient import RESOURCE_SLICES, Forbidden, KubeClient, NotFound

DEVICES = [
    DraDevice("cpu-0", {"numaNode": {"int": 0}}),
    DraDevice("cpu-1", {"numaNode": {"int": 0}}),
]


def test_publish_create_update_withdraw(kube: KubeClient) -> None:
    publisher = SlicePublisher(kube, "node-a", "cpu.kubenode.io")
    assert publisher.name == slice_name("node-a", "cpu.kubenode.io") == "node-a-cpu-kubenode-io"
    assert publisher.publish(DEVICES)
    first = kube.get(RESOURCE_SLICES, publisher.name)
    assert first["spec"]["driver"] == "cpu.kubenode.io"
    assert first["spec"]["nodeName"] == "node-a"
    assert first["spec"]["pool"] == {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in first["spec"]["devices"]] == ["cpu-0", "cpu-1"]
    assert not publisher.publish(DEVICES)
    # A fresh publisher (a restarted driver) finds the slice as it should be: nothing written.
    assert not SlicePublisher(kube, "node-a", "cpu.kubenode.io").publish(DEVICES)
    unhealthy = [DEVICES[0], dataclasses.replace(DEVICES[1], healthy=False)]
    assert publisher.publish(unhealthy)
    second = kube.get(RESOURCE_SLICES, publisher.name)
    assert second["spec"]["pool"]["generation"] == 2
    assert [d["name"] for d in second["spec"]["devices"]] == ["cpu-0"]
    publisher.withdraw()
    with pytest.raises(NotFound):
        kube.get(RESOURCE_SLICES, publisher.name)


class NodeAuthorizedSlices:
    """ResourceSlices as kube-apiserver's Node authorizer lets system:node:<node> see them
    (plugin/pkg/auth/authorizer/node/node_authorizer.go authorizeResourceSlice): create is allowed; get,
    update and delete only of a slice that exists and names the node (a graph edge); list only with the
    fieldSelector spec.nodeName=<node>. Anything else is 403, also a GET of a slice not made yet."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.slices: dict[str, dict[str, Any]] = {}
        self.writes = 0

    def _linked(self, name: str) -> dict[str, Any]:
        stored = self.slices.get(name)
        if stored is None or stored["spec"]["nodeName"] != self.node:
            raise Forbidden(403, "Forbidden", "node: no relationship found between node and this object")
        return stored

    def get(self, resource: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        return copy.deepcopy(self._linked(name))

    def list(self, resource: Any, namespace: str | None = None, **options: Any) -> dict[str, Any]:
        if options.get("field_selector") != f"spec.nodeName={self.node}":
            raise Forbidden(
                403, "Forbidden", "can only list/watch resourceslices with nodeName field selector"
            )
        items = [s for s in self.slices.values() if s["spec"]["nodeName"] == self.node]
        return {"items": copy.deepcopy(items), "metadata": {"resourceVersion": "1"}}

    def create(self, resource: Any, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.writes += 1
        self.slices[body["metadata"]["name"]] = copy.deepcopy(body)
        return body

    def update(self, resource: Any, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self._linked(body["metadata"]["name"])
        self.writes += 1
        self.slices[body["metadata"]["name"]] = copy.deepcopy(body)
        return body

    def delete(self, resource: Any, name: str, namespace: str | None = None, **options: Any) -> None:
        self._linked(name)
        del self.slices[name]


def test_publish_under_the_node_authorizer() -> None:
    """Against kube-apiserver 1.37 the driver's first step, a GET of its slice, was 403 (no slice yet, so no
    graph edge) and it never published (docs/interop.md): it now finds its slice by a node-scoped list."""
    api = NodeAuthorizedSlices("node-a")
    client = cast("KubeClient", api)
    publisher = SlicePublisher(client, "node-a", "cpu.kubenode.io")
    assert publisher.publish(DEVICES)
    assert api.slices[publisher.name]["spec"]["pool"]["generation"] == 1
    assert not SlicePublisher(client, "node-a", "cpu.kubenode.io").publish(DEVICES)
    assert publisher.publish([DEVICES[0], dataclasses.replace(DEVICES[1], healthy=False)])
    assert api.slices[publisher.name]["spec"]["pool"]["generation"] == 2 and api.writes == 2
    publisher.withdraw()
    assert not api.slices
    publisher.withdraw()  # none left: the authorizer's 403 is not an error
