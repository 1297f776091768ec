"""Per-resource strategies (kube's pkg/registry): defaults, validation, status and deletion rules."""

from __future__ import annotations

from apiserver.registry.base import Clock, Strategy, utc_now
from apiserver.registry.config import ConfigMapStrategy, SecretStrategy
from apiserver.registry.dra import (
    DeviceClassStrategy,
    ResourceClaimStrategy,
    ResourceClaimTemplateStrategy,
    ResourceSliceStrategy,
)
from apiserver.registry.kinds import EventStrategy, LeaseStrategy, NamespaceStrategy, NodeStrategy
from apiserver.registry.pods import PodStrategy
from apiserver.registry.rbac import (
    ClusterRoleBindingStrategy,
    ClusterRoleStrategy,
    RoleBindingStrategy,
    RoleStrategy,
)
from apiserver.registry.runtimeclass import RuntimeClassStrategy
from apiserver.registry.services import ServiceStrategy
from apiserver.registry.stored import stored_strategies
from apiserver.registry.topology import NodeResourceTopologyStrategy
from apiserver.registry.workloads import (
    DaemonSetStrategy,
    DeploymentStrategy,
    JobStrategy,
    ReplicaSetStrategy,
    ServiceAccountStrategy,
    StatefulSetStrategy,
)
from apiserver.resources import (
    CLUSTERROLEBINDINGS,
    CLUSTERROLES,
    CONFIGMAPS,
    DAEMONSETS,
    DEPLOYMENTS,
    DEVICECLASSES,
    EVENTS,
    JOBS,
    LEASES,
    NAMESPACES,
    NODE_RESOURCE_TOPOLOGIES,
    NODES,
    PODS,
    REPLICASETS,
    RESOURCECLAIMS,
    RESOURCECLAIMTEMPLATES,
    RESOURCESLICES,
    ROLEBINDINGS,
    ROLES,
    RUNTIMECLASSES,
    SECRETS,
    SERVICEACCOUNTS,
    SERVICES,
    STATEFULSETS,
)


def build_strategies(clock: Clock = utc_now) -> dict[str, Strategy]:
    """The strategy of each served resource, by plural."""
    return {
        "namespaces": NamespaceStrategy(NAMESPACES, clock),
        "nodes": NodeStrategy(NODES, clock),
        "pods": PodStrategy(PODS, clock),
        "events": EventStrategy(EVENTS, clock),
        "leases": LeaseStrategy(LEASES, clock),
        "configmaps": ConfigMapStrategy(CONFIGMAPS, clock),
        "secrets": SecretStrategy(SECRETS, clock),
        "runtimeclasses": RuntimeClassStrategy(RUNTIMECLASSES, clock),
        "services": ServiceStrategy(SERVICES, clock),
        "noderesourcetopologies": NodeResourceTopologyStrategy(NODE_RESOURCE_TOPOLOGIES, clock),
        "serviceaccounts": ServiceAccountStrategy(SERVICEACCOUNTS, clock),
        "deployments": DeploymentStrategy(DEPLOYMENTS, clock),
        "replicasets": ReplicaSetStrategy(REPLICASETS, clock),
        "daemonsets": DaemonSetStrategy(DAEMONSETS, clock),
        "jobs": JobStrategy(JOBS, clock),
        "deviceclasses": DeviceClassStrategy(DEVICECLASSES, clock),
        "resourceclaims": ResourceClaimStrategy(RESOURCECLAIMS, clock),
        "resourceclaimtemplates": ResourceClaimTemplateStrategy(RESOURCECLAIMTEMPLATES, clock),
        "resourceslices": ResourceSliceStrategy(RESOURCESLICES, clock),
        "roles": RoleStrategy(ROLES, clock),
        "clusterroles": ClusterRoleStrategy(CLUSTERROLES, clock),
        "rolebindings": RoleBindingStrategy(ROLEBINDINGS, clock),
        "clusterrolebindings": ClusterRoleBindingStrategy(CLUSTERROLEBINDINGS, clock),
        **stored_strategies(clock),
        "statefulsets": StatefulSetStrategy(
            STATEFULSETS, clock
        ),  # with its own defaults, over the stored one
    }


__all__ = ["Clock", "Strategy", "build_strategies", "utc_now"]
