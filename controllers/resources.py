"""The API resources the controllers read and write, by kind (the garbage collector's REST mapping).

The garbage collector looks owners up by (apiVersion, kind); a controller added later (the DRA claim
controller) registers its kinds with `register`, so the collector follows their ownerReferences too.
"""

from __future__ import annotations

from kubenode.kubeclient.client import NAMESPACES, NODES, PODS, RESOURCE_CLAIMS, Resource

DEPLOYMENTS = Resource("deployments", "Deployment", group="apps")
REPLICASETS = Resource("replicasets", "ReplicaSet", group="apps")
DAEMONSETS = Resource("daemonsets", "DaemonSet", group="apps")
JOBS = Resource("jobs", "Job", group="batch")
SERVICEACCOUNTS = Resource("serviceaccounts", "ServiceAccount")
CONFIGMAPS = Resource("configmaps", "ConfigMap")
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resourceclaimtemplates", "ResourceClaimTemplate", group="resource.k8s.io", version="v1"
)

# Kinds whose objects the garbage collector watches, as owners and as dependents.
GC_RESOURCES: list[Resource] = [PODS, REPLICASETS, DEPLOYMENTS, DAEMONSETS, JOBS]
# Kinds that may own but are not watched as dependents (looked up live when named as an owner).
OWNER_ONLY: list[Resource] = [NODES, NAMESPACES]


def register(resource: Resource) -> None:
    """Have the garbage collector follow this resource's ownerReferences."""
    if resource not in GC_RESOURCES:
        GC_RESOURCES.append(resource)


def by_kind(api_version: str, kind: str) -> Resource | None:
    for resource in (*GC_RESOURCES, *OWNER_ONLY):
        if resource.kind == kind and resource.api_version == api_version:
            return resource
    return None


__all__ = [
    "CONFIGMAPS", "DAEMONSETS", "DEPLOYMENTS", "GC_RESOURCES", "JOBS", "NAMESPACES", "NODES", "PODS",
    "REPLICASETS", "RESOURCE_CLAIMS", "RESOURCE_CLAIM_TEMPLATES", "SERVICEACCOUNTS", "by_kind", "register",
]  # fmt: skip
