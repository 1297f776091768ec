"""Pod and Node objects from decoded YAML/JSON, validated and defaulted as the API server would.

Defaults: namespace `default`, restartPolicy `Always`, terminationGracePeriodSeconds 30,
schedulerName `default-scheduler`, preemptionPolicy `PreemptLowerPriority`, and
requests defaulted from limits per resource. Validation covers what kubenode acts on:
names, quantities (well-formed and non-negative), requests <= limits, extended
resources (integer, requests == limits), enums, node selector terms and requirements
(operators, values, label keys, field selectors), and unknown fields in the objects read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kubenode.model.errors import echo
from kubenode.model.fields import Fields
from kubenode.model.objects import (
    Container,
    EnvVar,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
)
from kubenode.model.quantity import QuantityError, is_whole, to_amount
from kubenode.model.resources import (
    PODS,
    ResourceList,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_extended_resource_name,
    is_integer_resource,
    is_native_resource,
    is_overcommit_allowed,
    qualified_name_problem,
)
from kubenode.model.volumes import parse_env_from, parse_mounts, parse_volumes

# Pod UIDs become cgroup and file names: keep them to letters, digits and '-'
# (the systemd driver maps '-' to '_' and back, so '_' must not occur).
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,127}")  # used with fullmatch: "$" would allow a "\n"
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
RESTART_POLICIES = ("Always", "OnFailure", "Never")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
NODE_NAME_FIELD = "metadata.name"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # bytes, the API server's TotalAnnotationSizeLimitB
_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.ParseInt accepts in base 10


def is_valid_uid(uid: str) -> bool:
    return isinstance(uid, str) and _UID.fullmatch(uid) is not None


def _check_kind(obj: Fields, kind: str) -> None:
    if obj.string("kind", kind) != kind:
        raise obj.error("kind", f"expected {kind}, got {echo(obj.data.get('kind'))}")
    api_version = obj.string("apiVersion", "v1")
    if api_version != "v1":
        raise obj.error("apiVersion", f"expected v1, got {echo(api_version)}")


def _named_object(data: Mapping[str, Any], source: str, kind: str) -> tuple[Fields, Fields, str]:
    """The object of this kind, its metadata and its (validated) name."""
    obj = Fields(source, "", data, f"V1{kind}")
    _check_kind(obj, kind)
    meta = obj.child("metadata", "V1ObjectMeta")
    name = meta.string("name")
    if not is_dns1123_subdomain(name):
        raise meta.error("name", f"must be a lowercase RFC 1123 subdomain, got {echo(name)}")
    return obj, meta, name


def _resource_list(obj: Fields, key: str) -> ResourceList:
    raw = obj.data.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise obj.error(key, "must be a map of resource names to quantities")
    result: ResourceList = {}
    for name, value in raw.items():
        where = f"{key}.{name}"
        if not isinstance(name, str) or not (is_native_resource(name) or "/" in name):
            raise obj.error(
                where, "unknown resource name (extended resources need a domain, e.g. example.com/gpu)"
            )
        if "/" in name and not is_native_resource(name):
            problem = qualified_name_problem(name)
            if problem or not is_extended_resource_name(name):
                raise obj.error(where, f"invalid extended resource name: {problem or 'not allowed'}")
        try:
            if is_integer_resource(name) and not is_whole(value):
                raise QuantityError(f"must be an integer, got {echo(value)}")
            result[name] = to_amount(name, value)
        except QuantityError as exc:
            raise obj.error(where, str(exc)) from None
    return result


def _resources(container: Fields) -> tuple[ResourceList, ResourceList]:
    res = container.child("resources", "V1ResourceRequirements")
    limits = _resource_list(res, "limits")
    requests = _resource_list(res, "requests")
    for key, given in (("limits", limits), ("requests", requests)):
        if PODS in given:  # a node resource; the scheduler counts every pod as one already
            raise res.error(f"{key}.{PODS}", "must be a standard resource for containers")
    for name, amount in limits.items():
        requests.setdefault(name, amount)  # the API server defaults requests from limits
    for name, request in requests.items():
        limit = limits.get(name)
        if is_overcommit_allowed(name):
            if limit is not None and request > limit:
                raise res.error(f"requests.{name}", f"must be less than or equal to {name} limit")
        elif limit is None:
            raise res.error(f"limits.{name}", "Limit must be set for non overcommitable resources")
        elif request != limit:
            raise res.error(f"requests.{name}", f"must be equal to {name} limit")
    return requests, limits


def _env(container: Fields) -> tuple[EnvVar, ...]:
    result = []
    for item in container.children("env", "V1EnvVar"):
        name = item.string("name")
        if not name or not _ENV_NAME.fullmatch(name):
            raise item.error("name", f"invalid environment variable name {echo(name)}")
        value_from = item.child("valueFrom", "V1EnvVarSource")
        field_path = None
        resource_field = None
        key_ref = None
        if value_from.has("fieldRef"):
            field_path = value_from.child("fieldRef", "V1ObjectFieldSelector").string("fieldPath") or None
        elif value_from.has("resourceFieldRef"):
            ref = value_from.child("resourceFieldRef", "V1ResourceFieldSelector")
            resource_field = (
                ref.string("containerName"),
                ref.string("resource"),
                str(ref.data.get("divisor", "1")),
            )
        elif value_from.has("configMapKeyRef") or value_from.has("secretKeyRef"):
            kind, model = (
                ("configMapKeyRef", "V1ConfigMapKeySelector")
                if value_from.has("configMapKeyRef")
                else ("secretKeyRef", "V1SecretKeySelector")
            )
            ref = value_from.child(kind, model)
            if not ref.string("key"):
                raise ref.error("key", "Required value")
            resource = "configmaps" if kind == "configMapKeyRef" else "secrets"
            key_ref = (resource, ref.string("name"), ref.string("key"), ref.data.get("optional") is True)
        elif value_from.data:
            raise value_from.error(
                next(iter(value_from.data)),
                "only fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef are supported",
            )
        result.append(EnvVar(name, item.string("value"), field_path, resource_field, key_ref))
    return tuple(result)


def _container(obj: Fields, init: bool) -> Container:
    name = obj.string("name")
    if not is_dns1123_label(name):
        raise obj.error("name", f"must be a lowercase RFC 1123 label, got {echo(name)}")
    requests, limits = _resources(obj)
    restart_policy = obj.string("restartPolicy")
    if restart_policy and not (init and restart_policy == "Always"):
        raise obj.error("restartPolicy", "only init containers may set restartPolicy, and only to Always")
    return Container(
        name=name,
        image=obj.string("image"),
        command=obj.strings("command"),
        args=obj.strings("args"),
        env=_env(obj),
        working_dir=obj.string("workingDir"),
        requests=requests,
        limits=limits,
        restart_policy=restart_policy,
        volume_mounts=parse_mounts(obj),
        env_from=parse_env_from(obj),
    )


def _check_operator_values(req: Fields, operator: str, values: tuple[str, ...]) -> None:
    """The number (and for Gt/Lt the form) of values each operator takes, as
    ValidateNodeSelectorRequirement checks them."""
    if operator in ("In", "NotIn") and not values:
        raise req.error("values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
    if operator in ("Exists", "DoesNotExist") and values:
        raise req.error(
            "values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        )
    if operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise req.error(
                "values", "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
        # labels.NewRequirement refuses what strconv.ParseInt(v, 10, 64) cannot read; the
        # scheduler could never match it.
        if not _INTEGER.fullmatch(values[0]) or not -(2**63) <= int(values[0]) < 2**63:
            raise req.error(
                "values[0]", f"for 'Gt', 'Lt' operators, the value must be an integer, got {echo(values[0])}"
            )


def _label_requirement(req: Fields) -> NodeSelectorRequirement:
    operator = req.string("operator")
    if operator not in SELECTOR_OPERATORS:
        raise req.error("operator", f"must be one of {', '.join(SELECTOR_OPERATORS)}, got {echo(operator)}")
    values = req.strings("values")
    _check_operator_values(req, operator, values)
    key = req.string("key")
    problem = qualified_name_problem(key)
    if problem:
        raise req.error("key", f"invalid label key {echo(key)}: {problem}")
    return NodeSelectorRequirement(key, operator, values)


def _field_requirement(req: Fields) -> NodeSelectorRequirement:
    """ValidateNodeFieldSelectorRequirement: only metadata.name, with In/NotIn and one node name."""
    operator = req.string("operator")
    if operator not in ("In", "NotIn"):
        raise req.error("operator", f"must be In or NotIn for a node field selector, got {echo(operator)}")
    values = req.strings("values")
    if len(values) != 1:
        raise req.error(
            "values",
            "Required value: must be only one value when `operator` is 'In' or 'NotIn' "
            "for node field selector",
        )
    key = req.string("key")
    if key != NODE_NAME_FIELD:
        raise req.error("key", f"not a valid field selector key (only {NODE_NAME_FIELD}), got {echo(key)}")
    if not is_dns1123_subdomain(values[0]):
        raise req.error("values[0]", f"must be a lowercase RFC 1123 subdomain, got {echo(values[0])}")
    return NodeSelectorRequirement(key, operator, values)


def _term(term: Fields) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        tuple(_label_requirement(r) for r in term.children("matchExpressions", "V1NodeSelectorRequirement")),
        tuple(_field_requirement(r) for r in term.children("matchFields", "V1NodeSelectorRequirement")),
    )


def _required_terms(affinity: Fields) -> tuple[NodeSelectorTerm, ...]:
    selector = affinity.child("requiredDuringSchedulingIgnoredDuringExecution", "V1NodeSelector")
    terms = tuple(_term(t) for t in selector.children("nodeSelectorTerms", "V1NodeSelectorTerm"))
    if not terms:  # the API server refuses it rather than leave the pod unschedulable
        raise selector.error("nodeSelectorTerms", "Required value: must have at least one node selector term")
    return terms


def _tolerations(spec: Fields) -> tuple[Toleration, ...]:
    result = []
    for tol in spec.children("tolerations", "V1Toleration"):
        operator = tol.string("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise tol.error("operator", f"must be Equal or Exists, got {echo(operator)}")
        effect = tol.string("effect")
        if effect and effect not in TAINT_EFFECTS:
            raise tol.error("effect", f"must be one of {', '.join(TAINT_EFFECTS)}, got {echo(effect)}")
        # 0 means "evict at once", unlike an absent value ("tolerate forever"): keep it.
        seconds = tol.integer("tolerationSeconds", 0) if tol.has("tolerationSeconds") else None
        result.append(Toleration(tol.string("key"), operator, tol.string("value"), effect, seconds))
    return tuple(result)


def _int32(obj: Fields, key: str) -> int:
    """An int32 field (the API's priority): a larger value would not survive the API server's decoding."""
    value = obj.integer(key, 0)
    if not -(2**31) <= value < 2**31:
        raise obj.error(key, f"must fit in a 32-bit signed integer, got {echo(value)}")
    return value


def _annotations(meta: Fields) -> dict[str, str]:
    """metadata.annotations, at most 256 KiB of keys and values together (ValidateAnnotationsSize)."""
    annotations = meta.string_map("annotations")
    if sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()) > TOTAL_ANNOTATION_SIZE_LIMIT:
        raise meta.error("annotations", f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes")
    return annotations


# What a pod's spec alone decides (nodeName aside): the Pod fields a cache of parsed specs may share
# between pods of one template (scheduler.informers keeps one).
SpecFields = Mapping[str, Any]
SpecParser = Callable[[Fields], SpecFields]


def parse_pod_spec(spec: Fields) -> SpecFields:
    """The Pod fields spec decides, nodeName aside (keyword arguments of Pod); raises ValidationError."""
    volumes = parse_volumes(spec)
    containers = tuple(_container(c, init=False) for c in spec.children("containers", "V1Container"))
    if not containers:
        raise spec.error("containers", "Required value: a pod needs at least one container")
    init_containers = tuple(_container(c, init=True) for c in spec.children("initContainers", "V1Container"))
    seen: set[str] = set()
    for container in init_containers + containers:
        if container.name in seen:
            raise spec.error("containers", f"Duplicate value: container name {echo(container.name)}")
        seen.add(container.name)

    restart_policy = spec.string("restartPolicy", "Always")
    if restart_policy not in RESTART_POLICIES:
        raise spec.error(
            "restartPolicy", f"must be one of {', '.join(RESTART_POLICIES)}, got {echo(restart_policy)}"
        )
    grace = spec.integer("terminationGracePeriodSeconds", 30)
    if grace < 0:
        raise spec.error("terminationGracePeriodSeconds", "must be greater than or equal to 0")
    overhead = _resource_list(spec, "overhead")

    affinity = spec.child("affinity", "V1Affinity").child("nodeAffinity", "V1NodeAffinity")
    required = None
    if affinity.has("requiredDuringSchedulingIgnoredDuringExecution"):
        required = _required_terms(affinity)
    preferred = []
    for pref in affinity.children(
        "preferredDuringSchedulingIgnoredDuringExecution", "V1PreferredSchedulingTerm"
    ):
        weight = pref.integer("weight", 0)
        if not 1 <= weight <= 100:
            raise pref.error("weight", f"must be in the range 1-100, got {weight}")
        preferred.append(
            PreferredSchedulingTerm(weight, _term(pref.child("preference", "V1NodeSelectorTerm")))
        )
    return {
        "scheduler_name": spec.string("schedulerName", "default-scheduler"),
        "priority": _int32(spec, "priority"),
        "priority_class_name": spec.string("priorityClassName"),
        "preemption_policy": spec.string("preemptionPolicy", "PreemptLowerPriority"),
        "restart_policy": restart_policy,
        "termination_grace_period_seconds": grace,
        "init_containers": init_containers,
        "containers": containers,
        "overhead": overhead,
        "node_selector": spec.string_map("nodeSelector"),
        "required_node_affinity": required,
        "preferred_node_affinity": tuple(preferred),
        "tolerations": _tolerations(spec),
        "volumes": volumes,
    }


def parse_pod(data: Mapping[str, Any], source: str = "", *, spec_fields: SpecParser = parse_pod_spec) -> Pod:
    """A validated, defaulted Pod; raises ValidationError naming source and field. `spec_fields`
    reads the spec (a cache of parsed specs may stand in for `parse_pod_spec`)."""
    obj, meta, name = _named_object(data, source, "Pod")
    namespace = meta.string("namespace", "default")
    if not is_dns1123_label(namespace):
        raise meta.error("namespace", f"must be a lowercase RFC 1123 label, got {echo(namespace)}")
    uid = meta.string("uid")
    if uid and not is_valid_uid(uid):
        raise meta.error("uid", f"must be letters, digits and '-' (at most 128), got {echo(uid)}")

    spec = obj.child("spec", "V1PodSpec")
    from_spec = spec_fields(spec)
    status = obj.child("status")
    deletion_grace = meta.data.get("deletionGracePeriodSeconds")
    return Pod(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=meta.string_map("labels"),
        annotations=_annotations(meta),
        creation_timestamp=str(meta.data.get("creationTimestamp") or ""),
        deletion_timestamp=str(meta.data["deletionTimestamp"]) if meta.has("deletionTimestamp") else None,
        deletion_grace_period_seconds=deletion_grace if isinstance(deletion_grace, int) else None,
        node_name=spec.string("nodeName"),
        phase=status.string("phase", "Pending"),
        nominated_node_name=status.string("nominatedNodeName"),
        start_time=str(status.data.get("startTime") or ""),
        source=source,
        raw=data,
        **from_spec,
    )


def parse_node(data: Mapping[str, Any], source: str = "") -> Node:
    """A validated Node; allocatable defaults to capacity where absent."""
    obj, meta, name = _named_object(data, source, "Node")
    spec = obj.child("spec", "V1NodeSpec")
    taints = []
    for taint in spec.children("taints", "V1Taint"):
        effect = taint.string("effect")
        if effect not in TAINT_EFFECTS:
            raise taint.error("effect", f"must be one of {', '.join(TAINT_EFFECTS)}, got {echo(effect)}")
        key = taint.string("key")
        if qualified_name_problem(key):
            raise taint.error("key", f"invalid taint key {echo(key)}: {qualified_name_problem(key)}")
        taints.append(Taint(key, effect, taint.string("value")))
    status = obj.child("status")
    capacity = _resource_list(status, "capacity")
    allocatable = _resource_list(status, "allocatable") if status.has("allocatable") else dict(capacity)
    return Node(
        name=name,
        labels=meta.string_map("labels"),
        annotations=meta.string_map("annotations"),
        taints=tuple(taints),
        unschedulable=spec.boolean("unschedulable"),
        capacity=capacity,
        allocatable=allocatable,
        source=source,
        raw=data,
    )
