"""OpenAPI schemas of the served kinds, generated from the official `kubernetes` client's model classes.

The client's models carry each field's JSON name (`attribute_map`), type (`openapi_types`: `str`, `int`,
`List[V1Container]`, `Dict[str, str]`, `datetime`, `object`), description and requiredness (pydantic
`model_fields`). Walking them from the top-level kinds gives the same definitions kube-apiserver publishes
(`io.k8s.api.core.v1.Pod`, ...). What the models lack is added from kube's API types: the top-level
`x-kubernetes-group-version-kind`, and the strategic-merge-patch struct tags (`patchStrategy`,
`patchMergeKey`) that client-side `kubectl apply` reads to merge lists (containers by name, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from typing import Any

import kubernetes.client.models as models

META_PACKAGE = "io.k8s.apimachinery.pkg.apis.meta.v1"
META_TYPES = frozenset(
    {
        "ObjectMeta", "ListMeta", "Status", "StatusDetails", "StatusCause", "DeleteOptions",
        "Preconditions", "OwnerReference", "ManagedFieldsEntry", "WatchEvent", "APIResourceList",
        "APIResource", "APIGroupList", "APIGroup", "APIVersions", "GroupVersionForDiscovery",
        "ServerAddressByClientCIDR", "Patch", "LabelSelector", "LabelSelectorRequirement",
    }
)  # fmt: skip
GROUP_PACKAGES = {"coordination.k8s.io": "io.k8s.api.coordination.v1", "policy": "io.k8s.api.policy.v1"}
NODE_PACKAGE_TYPES = frozenset({"RuntimeClass", "RuntimeClassList", "Overhead", "Scheduling"})  # node.k8s.io
# The apps/v1, batch/v1 and autoscaling/v1 types, by the start of their names (the rest they use is core/v1).
TYPE_PREFIX_PACKAGES = (
    (("Deployment", "ReplicaSet", "DaemonSet", "RollingUpdateD"), "io.k8s.api.apps.v1"),
    (("Job", "PodFailurePolicy", "SuccessPolicy", "UncountedTerminatedPods"), "io.k8s.api.batch.v1"),
    (
        (
            "Device",
            "ResourceClaimSpec",
            "ResourceClaimStatus",
            "ResourceClaimTemplate",
            "ResourceClaimList",
            "ResourceClaimConsumerReference",
            "ResourceSlice",
            "ResourcePool",
            "AllocationResult",
            "AllocatedDeviceStatus",
            "CELDeviceSelector",
            "Counter",
            "ExactDeviceRequest",
            "OpaqueDeviceConfiguration",
            "NetworkDeviceData",
            "CapacityRequ",
        ),
        "io.k8s.api.resource.v1",
    ),
)
AUTOSCALING_TYPES = frozenset({"Scale", "ScaleSpec", "ScaleStatus"})
RBAC_TYPES = frozenset(
    {
        "Role", "RoleList", "ClusterRole", "ClusterRoleList", "RoleBinding", "RoleBindingList",
        "ClusterRoleBinding", "ClusterRoleBindingList", "PolicyRule", "AggregationRule", "RoleRef", "Subject",
    }
)  # fmt: skip

ADMISSION = "admissionregistration.k8s.io"
# The kinds served, as (group, version, kind, client model class); lists come with their items' kinds.
KINDS: tuple[tuple[str, str, str, str], ...] = (
    ("", "v1", "Pod", "V1Pod"),
    ("", "v1", "PodList", "V1PodList"),
    ("", "v1", "Node", "V1Node"),
    ("", "v1", "NodeList", "V1NodeList"),
    ("", "v1", "Namespace", "V1Namespace"),
    ("", "v1", "NamespaceList", "V1NamespaceList"),
    ("", "v1", "Event", "CoreV1Event"),
    ("", "v1", "EventList", "CoreV1EventList"),
    ("", "v1", "Binding", "V1Binding"),
    ("", "v1", "Service", "V1Service"),
    ("", "v1", "ServiceList", "V1ServiceList"),
    ("coordination.k8s.io", "v1", "Lease", "V1Lease"),
    ("coordination.k8s.io", "v1", "LeaseList", "V1LeaseList"),
    ("policy", "v1", "Eviction", "V1Eviction"),
    ("", "v1", "ConfigMap", "V1ConfigMap"),
    ("", "v1", "ConfigMapList", "V1ConfigMapList"),
    ("", "v1", "Secret", "V1Secret"),
    ("", "v1", "SecretList", "V1SecretList"),
    ("node.k8s.io", "v1", "RuntimeClass", "V1RuntimeClass"),
    ("node.k8s.io", "v1", "RuntimeClassList", "V1RuntimeClassList"),
    ("", "v1", "ServiceAccount", "V1ServiceAccount"),
    ("", "v1", "ServiceAccountList", "V1ServiceAccountList"),
    ("apps", "v1", "Deployment", "V1Deployment"),
    ("apps", "v1", "DeploymentList", "V1DeploymentList"),
    ("apps", "v1", "ReplicaSet", "V1ReplicaSet"),
    ("apps", "v1", "ReplicaSetList", "V1ReplicaSetList"),
    ("apps", "v1", "DaemonSet", "V1DaemonSet"),
    ("apps", "v1", "DaemonSetList", "V1DaemonSetList"),
    ("batch", "v1", "Job", "V1Job"),
    ("batch", "v1", "JobList", "V1JobList"),
    ("autoscaling", "v1", "Scale", "V1Scale"),
    ("authentication.k8s.io", "v1", "TokenRequest", "AuthenticationV1TokenRequest"),
    ("", "v1", "PersistentVolume", "V1PersistentVolume"),
    ("", "v1", "PersistentVolumeList", "V1PersistentVolumeList"),
    ("", "v1", "PersistentVolumeClaim", "V1PersistentVolumeClaim"),
    ("", "v1", "PersistentVolumeClaimList", "V1PersistentVolumeClaimList"),
    ("", "v1", "ReplicationController", "V1ReplicationController"),
    ("", "v1", "ReplicationControllerList", "V1ReplicationControllerList"),
    ("apps", "v1", "StatefulSet", "V1StatefulSet"),
    ("apps", "v1", "StatefulSetList", "V1StatefulSetList"),
    ("apps", "v1", "ControllerRevision", "V1ControllerRevision"),
    ("apps", "v1", "ControllerRevisionList", "V1ControllerRevisionList"),
    ("policy", "v1", "PodDisruptionBudget", "V1PodDisruptionBudget"),
    ("policy", "v1", "PodDisruptionBudgetList", "V1PodDisruptionBudgetList"),
    ("storage.k8s.io", "v1", "StorageClass", "V1StorageClass"),
    ("storage.k8s.io", "v1", "StorageClassList", "V1StorageClassList"),
    ("storage.k8s.io", "v1", "CSINode", "V1CSINode"),
    ("storage.k8s.io", "v1", "CSINodeList", "V1CSINodeList"),
    ("storage.k8s.io", "v1", "CSIDriver", "V1CSIDriver"),
    ("storage.k8s.io", "v1", "CSIDriverList", "V1CSIDriverList"),
    ("storage.k8s.io", "v1", "CSIStorageCapacity", "V1CSIStorageCapacity"),
    ("storage.k8s.io", "v1", "CSIStorageCapacityList", "V1CSIStorageCapacityList"),
    ("storage.k8s.io", "v1", "VolumeAttachment", "V1VolumeAttachment"),
    ("storage.k8s.io", "v1", "VolumeAttachmentList", "V1VolumeAttachmentList"),
    ("resource.k8s.io", "v1", "DeviceTaintRule", "V1DeviceTaintRule"),
    ("resource.k8s.io", "v1", "DeviceTaintRuleList", "V1DeviceTaintRuleList"),
    ("storage.k8s.io", "v1", "VolumeAttributesClass", "V1VolumeAttributesClass"),
    ("storage.k8s.io", "v1", "VolumeAttributesClassList", "V1VolumeAttributesClassList"),
    ("", "v1", "Endpoints", "V1Endpoints"),
    ("", "v1", "EndpointsList", "V1EndpointsList"),
    ("", "v1", "ResourceQuota", "V1ResourceQuota"),
    ("", "v1", "ResourceQuotaList", "V1ResourceQuotaList"),
    ("", "v1", "LimitRange", "V1LimitRange"),
    ("", "v1", "LimitRangeList", "V1LimitRangeList"),
    ("", "v1", "PodTemplate", "V1PodTemplate"),
    ("", "v1", "PodTemplateList", "V1PodTemplateList"),
    ("batch", "v1", "CronJob", "V1CronJob"),
    ("batch", "v1", "CronJobList", "V1CronJobList"),
    ("autoscaling", "v2", "HorizontalPodAutoscaler", "V2HorizontalPodAutoscaler"),
    ("autoscaling", "v2", "HorizontalPodAutoscalerList", "V2HorizontalPodAutoscalerList"),
    ("discovery.k8s.io", "v1", "EndpointSlice", "V1EndpointSlice"),
    ("discovery.k8s.io", "v1", "EndpointSliceList", "V1EndpointSliceList"),
    ("networking.k8s.io", "v1", "IPAddress", "V1IPAddress"),
    ("networking.k8s.io", "v1", "IPAddressList", "V1IPAddressList"),
    ("networking.k8s.io", "v1", "ServiceCIDR", "V1ServiceCIDR"),
    ("networking.k8s.io", "v1", "ServiceCIDRList", "V1ServiceCIDRList"),
    ("certificates.k8s.io", "v1", "CertificateSigningRequest", "V1CertificateSigningRequest"),
    ("certificates.k8s.io", "v1", "CertificateSigningRequestList", "V1CertificateSigningRequestList"),
    ("certificates.k8s.io", "v1", "PodCertificateRequest", "V1PodCertificateRequest"),
    ("certificates.k8s.io", "v1", "PodCertificateRequestList", "V1PodCertificateRequestList"),
    ("storagemigration.k8s.io", "v1", "StorageVersionMigration", "V1StorageVersionMigration"),
    ("storagemigration.k8s.io", "v1", "StorageVersionMigrationList", "V1StorageVersionMigrationList"),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy", "V1ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyList",
        "V1ValidatingAdmissionPolicyList",
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "V1ValidatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBindingList",
        "V1ValidatingAdmissionPolicyBindingList",
    ),
    ("scheduling.k8s.io", "v1", "PriorityClass", "V1PriorityClass"),
    ("scheduling.k8s.io", "v1", "PriorityClassList", "V1PriorityClassList"),
    ("events.k8s.io", "v1", "Event", "EventsV1Event"),
    ("events.k8s.io", "v1", "EventList", "EventsV1EventList"),
    ("resource.k8s.io", "v1", "DeviceClass", "V1DeviceClass"),
    ("resource.k8s.io", "v1", "DeviceClassList", "V1DeviceClassList"),
    ("resource.k8s.io", "v1", "ResourceClaim", "ResourceV1ResourceClaim"),
    ("resource.k8s.io", "v1", "ResourceClaimList", "V1ResourceClaimList"),
    ("resource.k8s.io", "v1", "ResourceClaimTemplate", "V1ResourceClaimTemplate"),
    ("resource.k8s.io", "v1", "ResourceClaimTemplateList", "V1ResourceClaimTemplateList"),
    ("resource.k8s.io", "v1", "ResourceSlice", "V1ResourceSlice"),
    ("resource.k8s.io", "v1", "ResourceSliceList", "V1ResourceSliceList"),
    ("rbac.authorization.k8s.io", "v1", "Role", "V1Role"),
    ("rbac.authorization.k8s.io", "v1", "RoleList", "V1RoleList"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "V1ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleList", "V1ClusterRoleList"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", "V1RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "RoleBindingList", "V1RoleBindingList"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "V1ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBindingList", "V1ClusterRoleBindingList"),
    # meta/v1 kinds: kube marks them with every group-version that serves them; core v1 is enough here.
    ("", "v1", "Status", "V1Status"),
    ("", "v1", "DeleteOptions", "V1DeleteOptions"),
    ("", "v1", "WatchEvent", "V1WatchEvent"),
)

# patchStrategy/patchMergeKey struct tags of k8s.io/api (core/v1 and meta/v1 types.go) for the fields of the
# served kinds: (type, JSON field) -> (strategy, merge key or ""). A list not named here is replaced whole.
PATCH_META: dict[tuple[str, str], tuple[str, str]] = {
    ("ObjectMeta", "finalizers"): ("merge", ""),
    ("ServiceSpec", "ports"): ("merge", "port"),
    ("ObjectMeta", "ownerReferences"): ("merge", "uid"),
    ("PodSpec", "volumes"): ("merge,retainKeys", "name"),
    ("PodSpec", "initContainers"): ("merge", "name"),
    ("PodSpec", "containers"): ("merge", "name"),
    ("PodSpec", "ephemeralContainers"): ("merge", "name"),
    ("PodSpec", "imagePullSecrets"): ("merge", "name"),
    ("PodSpec", "hostAliases"): ("merge", "ip"),
    ("PodSpec", "topologySpreadConstraints"): ("merge", "topologyKey"),
    ("PodSpec", "schedulingGates"): ("merge", "name"),
    ("PodSpec", "resourceClaims"): ("merge,retainKeys", "name"),
    ("Container", "ports"): ("merge", "containerPort"),
    ("Container", "env"): ("merge", "name"),
    ("Container", "volumeMounts"): ("merge", "mountPath"),
    ("Container", "volumeDevices"): ("merge", "devicePath"),
    ("EphemeralContainer", "env"): ("merge", "name"),
    ("EphemeralContainer", "volumeMounts"): ("merge", "mountPath"),
    ("EphemeralContainer", "volumeDevices"): ("merge", "devicePath"),
    ("PodStatus", "conditions"): ("merge", "type"),
    ("PodStatus", "podIPs"): ("merge", "ip"),
    ("PodStatus", "hostIPs"): ("merge", "ip"),
    ("PodStatus", "resourceClaimStatuses"): ("merge,retainKeys", "name"),
    ("NodeSpec", "podCIDRs"): ("merge", ""),
    ("NodeStatus", "conditions"): ("merge", "type"),
    ("NodeStatus", "addresses"): ("merge", "type"),
    ("NamespaceStatus", "conditions"): ("merge", "type"),
    ("DeploymentStatus", "conditions"): ("merge", "type"),
    ("ReplicaSetStatus", "conditions"): ("merge", "type"),
    ("DaemonSetStatus", "conditions"): ("merge", "type"),
    ("ServiceAccount", "secrets"): ("merge", "name"),
}
# resource.k8s.io/v1 lists that merge (listType=map in kube's types): the claim's consumers by uid.
PATCH_META[("ResourceClaimStatus", "reservedFor")] = ("merge", "uid")

PRIMITIVES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int64"},
    "float": {"type": "number", "format": "double"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "bytes": {"type": "string", "format": "byte"},  # Secret data, ConfigMap binaryData: base64 in JSON
    "object": {},  # IntOrString, RawExtension, FieldsV1: any JSON value
}

_VERSION_PREFIX = re.compile(
    r"^(?:Core|Policy|Coordination|Resource|Rbac)?V\d+(?:(?:alpha|beta)\d+)?(?=[A-Z])"
)


def type_name(class_name: str) -> str:
    """`V1Pod` -> `Pod`, `CoreV1Event` -> `Event`."""
    return _VERSION_PREFIX.sub("", class_name, count=1)


def definition_name(class_name: str) -> str:
    """The name kube-apiserver gives the definition, e.g. `io.k8s.api.core.v1.Pod`."""
    name = type_name(class_name)
    if class_name.startswith("ResourceV1"):  # resource.k8s.io's ResourceClaim (core/v1 has its own)
        return f"io.k8s.api.resource.v1.{name}"
    if name in META_TYPES:
        return f"{META_PACKAGE}.{name}"
    if name == "Eviction":
        return f"{GROUP_PACKAGES['policy']}.{name}"
    if name.startswith("Lease"):
        return f"{GROUP_PACKAGES['coordination.k8s.io']}.{name}"
    if name in NODE_PACKAGE_TYPES:
        return f"io.k8s.api.node.v1.{name}"
    if name in RBAC_TYPES:
        return f"io.k8s.api.rbac.v1.{name}"
    if name in AUTOSCALING_TYPES:
        return f"io.k8s.api.autoscaling.v1.{name}"
    for prefixes, package in TYPE_PREFIX_PACKAGES:
        if name.startswith(prefixes):
            return f"{package}.{name}"
    return f"io.k8s.api.core.v1.{name}"


def _description(cls: Any) -> str:
    doc = (cls.__doc__ or "").split("Attributes:", 1)[0]
    return " ".join(doc.split())


class SchemaSet:
    """Definitions reachable from some model classes; `ref_prefix` is `#/components/schemas/` (v3) or
    `#/definitions/` (v2)."""

    def __init__(self, ref_prefix: str) -> None:
        self.ref_prefix = ref_prefix
        self.schemas: dict[str, dict[str, Any]] = {}

    def ref(self, class_name: str) -> dict[str, Any]:
        self.add(class_name)
        return {"$ref": self.ref_prefix + definition_name(class_name)}

    def add(self, class_name: str) -> None:
        name = definition_name(class_name)
        if name in self.schemas:
            return
        cls = getattr(models, class_name)
        schema: dict[str, Any] = {"description": _description(cls), "type": "object", "properties": {}}
        self.schemas[name] = schema  # before the fields, so recursive types terminate
        owner = type_name(class_name)
        required: list[str] = []
        for attr, json_name in cls.attribute_map.items():
            field = cls.model_fields.get(attr) or cls.model_fields.get("var_" + attr.lstrip("_"))
            prop = self.type_schema(cls.openapi_types[attr])
            if field is not None and field.description:
                # v3 ignores siblings of $ref, so kube wraps a described reference in allOf; v2 does not.
                wrap = "$ref" in prop and self.ref_prefix.startswith("#/components/")
                prop = {"allOf": [prop], "description": field.description} if wrap else {
                    **prop, "description": field.description,
                }  # fmt: skip
            if (owner, json_name) in PATCH_META:
                strategy, key = PATCH_META[(owner, json_name)]
                prop["x-kubernetes-patch-strategy"] = strategy
                if key:
                    prop["x-kubernetes-patch-merge-key"] = key
            schema["properties"][json_name] = prop
            if field is not None and field.is_required():
                required.append(json_name)
        if required:
            schema["required"] = sorted(required)
        gvks = [{"group": g, "version": v, "kind": k} for g, v, k, c in KINDS if c == class_name]
        if gvks:
            schema["x-kubernetes-group-version-kind"] = gvks

    def type_schema(self, spec: str) -> dict[str, Any]:
        spec = spec.strip()
        if spec in PRIMITIVES:
            return dict(PRIMITIVES[spec])
        if spec.startswith(("List[", "list[")):
            return {"type": "array", "items": self.type_schema(spec[5:-1])}
        if spec.startswith(("Dict[", "dict(")):
            inner = spec[5:-1]
            return {"type": "object", "additionalProperties": self.type_schema(inner.split(",", 1)[1])}
        return self.ref(spec)


def add_patch_schema(schemas: SchemaSet) -> str:
    """meta/v1 Patch: the one definition with no client model (a PATCH body is any JSON object)."""
    name = f"{META_PACKAGE}.Patch"
    schemas.schemas[name] = {
        "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request "
        "body.",
        "type": "object",
    }
    return schemas.ref_prefix + name


@cache
def kind_class(group: str, kind: str) -> str:
    for g, _, k, cls in KINDS:
        if (g, k) == (group, kind):
            return cls
    raise KeyError(f"no client model for {group or 'core'}/{kind}")


def schema_set(ref_prefix: str, classes: Iterable[str]) -> SchemaSet:
    result = SchemaSet(ref_prefix)
    for cls in classes:
        result.add(cls)
    return result
