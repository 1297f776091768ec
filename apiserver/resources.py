"""The resources this API server serves, as discovery describes them.

`SERVED` is the single list: routing, discovery (SURFACE's `discovery.py`), OpenAPI and the
registry all read it, so a resource is added in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")


@dataclass(frozen=True)
class SubresourceInfo:
    name: str  # "status", "binding", "eviction"
    kind: str  # kind of the subresource's body ("Pod" for status, "Binding", "Eviction")
    verbs: tuple[str, ...]
    group: str = ""  # only where it differs from the parent (eviction: policy/v1)
    version: str = ""
    connect: bool = False  # a stream proxied to the node (exec, attach, portforward): no body, no schema


@dataclass(frozen=True)
class ResourceInfo:
    group: str  # "" for core
    version: str  # "v1"
    plural: str  # "pods"
    singular: str  # "pod"
    kind: str  # "Pod"
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[SubresourceInfo, ...] = ()
    # False for a resource the official client has no model for (served as kube serves a CRD): it is
    # left out of the OpenAPI documents, and its strategy checks bodies itself.
    has_client_model: bool = True

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def subresource(self, name: str) -> SubresourceInfo | None:
        return next((s for s in self.subresources if s.name == name), None)


NAMESPACES = ResourceInfo(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    namespaced=False,
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    short_names=("ns",),
    subresources=(SubresourceInfo("status", "Namespace", STATUS_VERBS),),
)
NODES = ResourceInfo(
    "",
    "v1",
    "nodes",
    "node",
    "Node",
    namespaced=False,
    verbs=ALL_VERBS,
    short_names=("no",),
    subresources=(SubresourceInfo("status", "Node", STATUS_VERBS),),
)
PODS = ResourceInfo(
    "",
    "v1",
    "pods",
    "pod",
    "Pod",
    namespaced=True,
    verbs=ALL_VERBS,
    short_names=("po",),
    categories=("all",),
    subresources=(
        SubresourceInfo("binding", "Binding", ("create",)),
        SubresourceInfo("eviction", "Eviction", ("create",), group="policy", version="v1"),
        SubresourceInfo("log", "Pod", ("get",)),  # proxied to the node (handlers/podlogs.py)
        # Streams proxied to the node (handlers/podconnect.py); a WebSocket GET is authorized as create.
        SubresourceInfo("exec", "PodExecOptions", ("create",), connect=True),
        SubresourceInfo("attach", "PodAttachOptions", ("create",), connect=True),
        SubresourceInfo("portforward", "PodPortForwardOptions", ("create",), connect=True),
        SubresourceInfo("status", "Pod", STATUS_VERBS),
    ),
)
EVENTS = ResourceInfo(
    "", "v1", "events", "event", "Event", namespaced=True, verbs=ALL_VERBS, short_names=("ev",)
)
# events.k8s.io/v1: the same objects as core/v1 Events, converted (handlers/eventsv1.py).
EVENTS_V1 = ResourceInfo(
    "events.k8s.io", "v1", "events", "event", "Event", namespaced=True, verbs=ALL_VERBS, short_names=("ev",)
)
LEASES = ResourceInfo(
    "coordination.k8s.io", "v1", "leases", "lease", "Lease", namespaced=True, verbs=ALL_VERBS
)

CONFIGMAPS = ResourceInfo(
    "", "v1", "configmaps", "configmap", "ConfigMap", namespaced=True, verbs=ALL_VERBS, short_names=("cm",)
)
SECRETS = ResourceInfo("", "v1", "secrets", "secret", "Secret", namespaced=True, verbs=ALL_VERBS)
RUNTIMECLASSES = ResourceInfo(
    "node.k8s.io", "v1", "runtimeclasses", "runtimeclass", "RuntimeClass", namespaced=False, verbs=ALL_VERBS
)

SERVICES = ResourceInfo(
    "",
    "v1",
    "services",
    "service",
    "Service",
    namespaced=True,
    verbs=ALL_VERBS,
    short_names=("svc",),
    categories=("all",),
    subresources=(SubresourceInfo("status", "Service", STATUS_VERBS),),
)

# The CRD of k8stopologyawareschedwg/noderesourcetopology-api, cluster-scoped, one object per node.
NODE_RESOURCE_TOPOLOGIES = ResourceInfo(
    "topology.node.k8s.io",
    "v1alpha2",
    "noderesourcetopologies",
    "noderesourcetopology",
    "NodeResourceTopology",
    namespaced=False,
    verbs=ALL_VERBS,
    short_names=("node-res-topo",),
    has_client_model=False,
)

SERVICEACCOUNTS = ResourceInfo(
    "", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", namespaced=True, verbs=ALL_VERBS,
    short_names=("sa",),
    subresources=(SubresourceInfo("token", "TokenRequest", ("create",), "authentication.k8s.io", "v1"),),
)  # fmt: skip


def _workload(group: str, plural: str, kind: str, short_names: tuple[str, ...], scale: bool) -> ResourceInfo:
    """An apps/v1 or batch/v1 workload: status always, scale (autoscaling/v1 Scale) where kube has it."""
    subresources = [SubresourceInfo("status", kind, STATUS_VERBS)]
    if scale:
        subresources.append(SubresourceInfo("scale", "Scale", STATUS_VERBS, "autoscaling", "v1"))
    return ResourceInfo(
        group, "v1", plural, plural[:-1], kind, namespaced=True, verbs=ALL_VERBS, short_names=short_names,
        categories=("all",), subresources=tuple(sorted(subresources, key=lambda s: s.name)),
    )  # fmt: skip


DEPLOYMENTS = _workload("apps", "deployments", "Deployment", ("deploy",), scale=True)
REPLICASETS = _workload("apps", "replicasets", "ReplicaSet", ("rs",), scale=True)
DAEMONSETS = _workload("apps", "daemonsets", "DaemonSet", ("ds",), scale=False)
JOBS = _workload("batch", "jobs", "Job", (), scale=False)
WORKLOADS = (DEPLOYMENTS, REPLICASETS, DAEMONSETS, JOBS)

# resource.k8s.io/v1, Dynamic Resource Allocation (kube's pkg/registry/resource): no short names or
# categories.
DEVICECLASSES = ResourceInfo(
    "resource.k8s.io", "v1", "deviceclasses", "deviceclass", "DeviceClass", namespaced=False, verbs=ALL_VERBS
)
RESOURCECLAIMS = ResourceInfo(
    "resource.k8s.io", "v1", "resourceclaims", "resourceclaim", "ResourceClaim", namespaced=True,
    verbs=ALL_VERBS, subresources=(SubresourceInfo("status", "ResourceClaim", STATUS_VERBS),),
)  # fmt: skip
RESOURCECLAIMTEMPLATES = ResourceInfo(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate",
    namespaced=True, verbs=ALL_VERBS,
)  # fmt: skip
RESOURCESLICES = ResourceInfo(
    "resource.k8s.io",
    "v1",
    "resourceslices",
    "resourceslice",
    "ResourceSlice",
    namespaced=False,
    verbs=ALL_VERBS,
)
DRA = (DEVICECLASSES, RESOURCECLAIMS, RESOURCECLAIMTEMPLATES, RESOURCESLICES)

# rbac.authorization.k8s.io/v1 (kube's pkg/registry/rbac): no short names, no categories.
RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = ResourceInfo(RBAC_GROUP, "v1", "roles", "role", "Role", namespaced=True, verbs=ALL_VERBS)
CLUSTERROLES = ResourceInfo(
    RBAC_GROUP, "v1", "clusterroles", "clusterrole", "ClusterRole", namespaced=False, verbs=ALL_VERBS
)
ROLEBINDINGS = ResourceInfo(
    RBAC_GROUP, "v1", "rolebindings", "rolebinding", "RoleBinding", namespaced=True, verbs=ALL_VERBS
)
CLUSTERROLEBINDINGS = ResourceInfo(
    RBAC_GROUP, "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", namespaced=False,
    verbs=ALL_VERBS,
)  # fmt: skip
RBAC = (ROLES, CLUSTERROLES, ROLEBINDINGS, CLUSTERROLEBINDINGS)


def _stored(
    group: str,
    plural: str,
    kind: str,
    namespaced: bool,
    short_names: tuple[str, ...] = (),
    status: bool = False,
    scale: bool = False,
    categories: tuple[str, ...] = (),
    version: str = "v1",
) -> ResourceInfo:
    """A kind stored and served as kube serves it, with its own checks only where registry/stored.py has
    them: what the real kube-scheduler and kube-controller-manager inform on (volumes, storage, PDBs, the
    other workloads) but kubenode's own components do not use."""
    subresources = []
    if status:
        subresources.append(SubresourceInfo("status", kind, STATUS_VERBS))
    if scale:
        subresources.append(SubresourceInfo("scale", "Scale", STATUS_VERBS, "autoscaling", "v1"))
    return ResourceInfo(
        group, version, plural, kind.lower(), kind, namespaced=namespaced, verbs=ALL_VERBS,
        short_names=short_names, categories=categories,
        subresources=tuple(sorted(subresources, key=lambda s: s.name)),
    )  # fmt: skip


PERSISTENTVOLUMES = _stored("", "persistentvolumes", "PersistentVolume", False, ("pv",), status=True)
PERSISTENTVOLUMECLAIMS = _stored(
    "", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), status=True
)
REPLICATIONCONTROLLERS = _stored(
    "", "replicationcontrollers", "ReplicationController", True, ("rc",), status=True, scale=True,
    categories=("all",),
)  # fmt: skip
STATEFULSETS = _stored(
    "apps", "statefulsets", "StatefulSet", True, ("sts",), status=True, scale=True, categories=("all",)
)
CONTROLLERREVISIONS = _stored("apps", "controllerrevisions", "ControllerRevision", True)
PODDISRUPTIONBUDGETS = _stored("policy", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), True)
STORAGE_GROUP = "storage.k8s.io"
STORAGECLASSES = _stored(STORAGE_GROUP, "storageclasses", "StorageClass", False, ("sc",))
CSINODES = _stored(STORAGE_GROUP, "csinodes", "CSINode", False)
CSIDRIVERS = _stored(STORAGE_GROUP, "csidrivers", "CSIDriver", False)
CSISTORAGECAPACITIES = _stored(STORAGE_GROUP, "csistoragecapacities", "CSIStorageCapacity", True)
VOLUMEATTACHMENTS = _stored(STORAGE_GROUP, "volumeattachments", "VolumeAttachment", False, status=True)
DEVICETAINTRULES = _stored("resource.k8s.io", "devicetaintrules", "DeviceTaintRule", False, status=True)
# what kube-controller-manager's controllers inform on besides
VOLUMEATTRIBUTESCLASSES = _stored(
    STORAGE_GROUP, "volumeattributesclasses", "VolumeAttributesClass", False, ("vac",)
)
ENDPOINTS = _stored("", "endpoints", "Endpoints", True, ("ep",))
RESOURCEQUOTAS = _stored("", "resourcequotas", "ResourceQuota", True, ("quota",), status=True)
LIMITRANGES = _stored("", "limitranges", "LimitRange", True, ("limits",))
PODTEMPLATES = _stored("", "podtemplates", "PodTemplate", True)
CRONJOBS = _stored("batch", "cronjobs", "CronJob", True, ("cj",), status=True, categories=("all",))
HORIZONTALPODAUTOSCALERS = _stored(
    "autoscaling", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ("hpa",), status=True,
    categories=("all",), version="v2",
)  # fmt: skip
ENDPOINTSLICES = _stored("discovery.k8s.io", "endpointslices", "EndpointSlice", True)
IPADDRESSES = _stored("networking.k8s.io", "ipaddresses", "IPAddress", False, ("ip",))
SERVICECIDRS = _stored("networking.k8s.io", "servicecidrs", "ServiceCIDR", False, status=True)
CERTIFICATESIGNINGREQUESTS = _stored(
    "certificates.k8s.io",
    "certificatesigningrequests",
    "CertificateSigningRequest",
    False,
    ("csr",),
    status=True,
)
PODCERTIFICATEREQUESTS = _stored(
    "certificates.k8s.io", "podcertificaterequests", "PodCertificateRequest", True, status=True
)
STORAGEVERSIONMIGRATIONS = _stored(
    "storagemigration.k8s.io", "storageversionmigrations", "StorageVersionMigration", False, status=True
)
VALIDATINGADMISSIONPOLICIES = _stored(
    "admissionregistration.k8s.io", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False,
    status=True,
)  # fmt: skip
VALIDATINGADMISSIONPOLICYBINDINGS = _stored(
    "admissionregistration.k8s.io", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
    False,
)  # fmt: skip
PRIORITYCLASSES = _stored("scheduling.k8s.io", "priorityclasses", "PriorityClass", False, ("pc",))
STORED = (
    PERSISTENTVOLUMES, PERSISTENTVOLUMECLAIMS, REPLICATIONCONTROLLERS, STATEFULSETS, CONTROLLERREVISIONS,
    PODDISRUPTIONBUDGETS, STORAGECLASSES, CSINODES, CSIDRIVERS, CSISTORAGECAPACITIES, VOLUMEATTACHMENTS,
    DEVICETAINTRULES, VOLUMEATTRIBUTESCLASSES, ENDPOINTS, RESOURCEQUOTAS, LIMITRANGES, PODTEMPLATES, CRONJOBS,
    HORIZONTALPODAUTOSCALERS, ENDPOINTSLICES, IPADDRESSES, SERVICECIDRS, CERTIFICATESIGNINGREQUESTS,
    PODCERTIFICATEREQUESTS, STORAGEVERSIONMIGRATIONS, VALIDATINGADMISSIONPOLICIES,
    VALIDATINGADMISSIONPOLICYBINDINGS, PRIORITYCLASSES,
)  # fmt: skip

SERVED: tuple[ResourceInfo, ...] = (
    NAMESPACES, NODES, PODS, EVENTS, EVENTS_V1, LEASES, CONFIGMAPS, SECRETS, RUNTIMECLASSES, SERVICES,
    NODE_RESOURCE_TOPOLOGIES, SERVICEACCOUNTS, *WORKLOADS, *DRA, *RBAC, *STORED,
)  # fmt: skip
# metrics.k8s.io, which metrics-server serves on a real cluster: in discovery only (no storage, no OpenAPI);
# apiserver/handlers/nodemetrics.py answers its requests.
METRICS_API: tuple[ResourceInfo, ...] = (
    ResourceInfo(
        "metrics.k8s.io", "v1beta1", "nodes", "", "NodeMetrics", namespaced=False, verbs=("get", "list")
    ),
    ResourceInfo(
        "metrics.k8s.io", "v1beta1", "pods", "", "PodMetrics", namespaced=True, verbs=("get", "list")
    ),
)

# Not a stored resource: the legacy POST /api/v1/namespaces/{ns}/bindings (body names the pod).
BINDINGS = ResourceInfo("", "v1", "bindings", "binding", "Binding", namespaced=True, verbs=("create",))


def lookup(group: str, version: str, plural: str) -> ResourceInfo | None:
    for info in (*SERVED, BINDINGS):
        if info.group == group and info.version == version and info.plural == plural:
            return info
    return None
