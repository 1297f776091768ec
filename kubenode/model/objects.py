"""Plain, immutable dataclasses for the parts of Pods and Nodes that kubenode acts on.

They are built by `kubenode.model.parse` (validated and defaulted) or directly by code
that generates objects (benchmarks, tests). Resource amounts are integers: millicores
for cpu, base units for everything else. `raw` keeps the decoded source object so the
agent and the simulator can echo it back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kubenode.model.requests import QOSClass, pod_limits, pod_requests, qos_class


@dataclass(frozen=True)
class EnvVar:
    """One container env entry: a literal value, or a reference resolved by the agent."""

    name: str
    value: str = ""
    field_path: str | None = None  # valueFrom.fieldRef.fieldPath, e.g. metadata.name
    resource_field: tuple[str, str, str] | None = None  # (containerName, resource, divisor)
    # valueFrom.configMapKeyRef / secretKeyRef: ("configmaps" | "secrets", name, key, optional)
    key_ref: tuple[str, str, str, bool] | None = None


EMPTY_DIR = "emptyDir"
HOST_PATH = "hostPath"
CONFIG_MAP = "configMap"
SECRET = "secret"
DOWNWARD_API = "downwardAPI"
PROJECTED = "projected"
SERVICE_ACCOUNT_TOKEN = "serviceAccountToken"  # a source of projected volumes only
VOLUME_KINDS = (EMPTY_DIR, HOST_PATH, CONFIG_MAP, SECRET, DOWNWARD_API, PROJECTED)
DEFAULT_MODE = 0o644  # kube's SecretVolumeSourceDefaultMode, ConfigMapVolumeSourceDefaultMode, ...


@dataclass(frozen=True)
class KeyToPath:
    """One `items` entry (a key, or for downwardAPI a field, written to a relative path)."""

    path: str
    key: str = ""
    mode: int | None = None
    field_path: str | None = None  # downwardAPI fieldRef
    resource_field: tuple[str, str, str] | None = None  # downwardAPI resourceFieldRef


@dataclass(frozen=True)
class Projection:
    """One source of files: a ConfigMap, a Secret, downward API fields or a ServiceAccount token."""

    kind: str  # configMap | secret | downwardAPI | serviceAccountToken
    name: str = ""
    items: tuple[KeyToPath, ...] = ()  # serviceAccountToken: the one file, at its path
    optional: bool = False
    audience: str = ""  # serviceAccountToken: "" is the API server's audience
    expiration_seconds: int = 3600  # serviceAccountToken (kube's default)


@dataclass(frozen=True)
class Volume:
    name: str
    kind: str  # one of VOLUME_KINDS, or the unsupported type's field name
    medium: str = ""  # emptyDir: "" (disk) or "Memory"
    size_limit: int | None = None  # emptyDir, bytes
    path: str = ""  # hostPath
    host_path_type: str = ""
    projections: tuple[Projection, ...] = ()
    default_mode: int = DEFAULT_MODE

    @property
    def is_projected(self) -> bool:
        return self.kind in (CONFIG_MAP, SECRET, DOWNWARD_API, PROJECTED)


@dataclass(frozen=True)
class VolumeMount:
    name: str
    mount_path: str
    read_only: bool = False
    sub_path: str = ""


@dataclass(frozen=True)
class EnvFromSource:
    resource: str  # configmaps | secrets
    name: str
    prefix: str = ""
    optional: bool = False


@dataclass(frozen=True)
class Container:
    name: str
    image: str = ""
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    working_dir: str = ""
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    # "Always" on an init container makes it a sidecar (restartable init container).
    restart_policy: str = ""
    volume_mounts: tuple[VolumeMount, ...] = ()
    env_from: tuple[EnvFromSource, ...] = ()

    @property
    def is_sidecar(self) -> bool:
        return self.restart_policy == "Always"


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" matches every effect
    toleration_seconds: int | None = None


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute
    value: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str = "default"
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    creation_timestamp: str = ""
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    restart_policy: str = "Always"
    termination_grace_period_seconds: int = 30
    init_containers: tuple[Container, ...] = ()
    containers: tuple[Container, ...] = ()
    overhead: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # None: no required node affinity. Otherwise the terms are ORed.
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    volumes: tuple[Volume, ...] = ()
    phase: str = "Pending"
    nominated_node_name: str = ""
    start_time: str = ""
    # Where the object came from (a file path, "api"), for messages.
    source: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        """namespace/name, as kubectl and kube-scheduler messages name a pod."""
        return f"{self.namespace}/{self.name}"

    @property
    def all_containers(self) -> tuple[Container, ...]:
        return self.init_containers + self.containers

    def bound_to(self, node: str) -> Pod:
        """This pod on node, no longer nominated: dataclasses.replace without re-running __init__
        (a tenth of its cost on the scheduler's hot path). The cached requests, limits and QoS
        class carry over, as none depends on the node."""
        bound = object.__new__(Pod)
        bound.__dict__.update(self.__dict__)
        bound.__dict__["node_name"] = node
        bound.__dict__["nominated_node_name"] = ""
        return bound

    @cached_property
    def requests(self) -> Mapping[str, int]:
        """Effective pod requests (kube's PodRequests, overhead included)."""
        return pod_requests(self)

    @cached_property
    def limits(self) -> Mapping[str, int]:
        return pod_limits(self)

    @cached_property
    def qos_class(self) -> QOSClass:
        return qos_class(self)


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    capacity: Mapping[str, int] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    source: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
