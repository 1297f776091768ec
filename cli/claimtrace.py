"""The DRA half of `kubenode trace pod`: the device each claim of the pod got, why other nodes did not fit.

It lists the nodes and the resource.k8s.io/v1 objects (DeviceClasses, ResourceSlices, the pod's
namespace's ResourceClaims) and asks the scheduler's allocator (scheduler/dra/explain.py) for its
verdict per node. An object that does not parse is left out and named under `problems`; an API
without resource.k8s.io/v1 is said so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kubenode.dra.types import parse_device_class, parse_resource_claim, parse_resource_slice
from kubenode.kubeclient import NODES, KubeClient, KubeError, NotFound, Resource
from kubenode.model.errors import ValidationError
from kubenode.model.parse import parse_node, parse_pod
from scheduler.dra.explain import explain
from scheduler.dra.live import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES

T = TypeVar("T")


def trace_claims(client: KubeClient, pod_object: dict[str, Any]) -> dict[str, Any] | None:
    """None for a pod without resourceClaims."""
    if not (pod_object.get("spec") or {}).get("resourceClaims"):
        return None
    namespace = (pod_object.get("metadata") or {}).get("namespace") or "default"
    problems: list[str] = []
    try:
        pod = parse_pod(pod_object, "api")
        nodes = _parsed(_items(client, NODES), lambda o: parse_node(o, "api"), problems)
        classes = _parsed(_items(client, DEVICE_CLASSES), parse_device_class, problems)
        slices = _parsed(_items(client, RESOURCE_SLICES), parse_resource_slice, problems)
        claims = _parsed(_items(client, RESOURCE_CLAIMS, namespace), parse_resource_claim, problems)
    except NotFound:
        return {"problems": ["the API serves no resource.k8s.io/v1"]}
    except (KubeError, ValidationError) as exc:
        return {"problems": [str(exc)]}
    return {**explain(pod, nodes, classes, slices, claims), "problems": problems}


def _items(client: KubeClient, resource: Resource, namespace: str | None = None) -> list[dict[str, Any]]:
    return client.list_all(resource, namespace)[0]


def _parsed(items: Any, parse: Callable[[dict[str, Any]], T], problems: list[str]) -> list[T]:
    out = []
    for item in items:
        try:
            out.append(parse(item))
        except ValidationError as exc:
            problems.append(f"left out: {exc}")
    return out
