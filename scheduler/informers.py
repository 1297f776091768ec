"""Node and pod informers that feed the engine, decoding watch events straight into the model.

The shared client's Informer lists then watches; its `decode` here turns each API object
(a dict from orjson) into `kubenode.model` Node/Pod with the same validating parsers the
simulator uses, never through the official client's models. A pod's update that only binds
it reuses the pod decoded before (`decode_pod_update`), so each pod is parsed once, and pods
with the same spec (one template's) share its parse (`SpecCache`): only their metadata is
read per pod. An object that does not parse becomes a `BadObject` carrying the field-naming
message, so the informer keeps going.

Routing, as kube-scheduler's event handlers:
- nodes: add/update -> engine.update_node (which moves the unschedulable pods the change may
  help), delete -> engine.remove_node;
- pods (terminal phases excluded by field selector): an assigned pod goes to the cache, an
  unassigned pod of one of our profiles to the queue, any other pod is ignored (so this
  scheduler can run beside kube-scheduler); delete -> engine.remove_pod, which drops a pod
  that was queued or in flight and frees what an assigned one held;
- NodeResourceTopology objects: add/update -> engine.update_topology (which moves the pods the NUMA
  filter turned down), delete or an object that does not parse -> engine.update_topology(None, name);
- a pod of ours that fails to parse gets one Warning FailedScheduling event naming the field
  (again only if its object changes) and never enters the queue, so it is not retried in a
  loop; an update that fixes it lets it in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubenode.kubeclient import NODE_RESOURCE_TOPOLOGIES, NODES, PODS, KubeClient
from kubenode.kubeclient.informer import Informer
from kubenode.model.errors import ValidationError
from kubenode.model.fields import Fields
from kubenode.model.objects import Node, Pod
from kubenode.model.parse import SpecFields, parse_node, parse_pod, parse_pod_spec
from scheduler.engine import Scheduler
from scheduler.numa import NodeTopology, TopologyError, parse_node_topology

log = logging.getLogger(__name__)

# kube-scheduler's pod informer: every pod but the finished ones.
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
SOURCE = "api"
SPEC_CACHE_SIZE = 1024  # distinct pod specs kept parsed


@dataclass(frozen=True)
class BadObject:
    """An API object that failed to parse: enough of it to route it and report why."""

    kind: str
    name: str
    namespace: str
    uid: str
    message: str
    scheduler_name: str = ""
    node_name: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def _bad(kind: str, obj: Mapping[str, Any], message: str) -> BadObject:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(meta, Mapping) and isinstance(spec, Mapping)
    return BadObject(
        kind=kind,
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        uid=str(meta.get("uid") or ""),
        message=message,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=str(spec.get("nodeName") or ""),
        raw=obj,
    )


def _field_message(exc: ValidationError) -> str:
    """ "field: problem" (the source is always the API here)."""
    return f"{exc.field}: {exc.message}" if exc.field else exc.message


class SpecCache:
    """Parsed pod specs by their JSON (nodeName left out): the pods of one template (a Deployment's,
    a Job's, the benchmark's) share one spec, which is then parsed once, not once per pod. Equal
    bytes are equal JSON values, which parse_pod_spec maps to equal fields; a spec that does not
    parse is never kept, so each such pod still reports its own error. The requests, limits and
    QoS class, which depend on the spec alone, are computed once per spec too."""

    def __init__(self, size: int = SPEC_CACHE_SIZE) -> None:
        self.size = size
        self._specs: dict[bytes, tuple[SpecFields, dict[str, Any]]] = {}
        self._lock = threading.Lock()  # informers of several schedulers in one process share it
        self.hits = 0

    def __call__(self, spec: Fields) -> SpecFields:
        return self._entry(spec)[0]

    def _entry(self, spec: Fields) -> tuple[SpecFields, dict[str, Any]]:
        data = spec.data
        if "nodeName" in data:
            data = {key: value for key, value in data.items() if key != "nodeName"}
        try:
            key = orjson.dumps(data)
        except TypeError:  # not JSON (a YAML-only value): no key, parse it
            return parse_pod_spec(spec), {}
        with self._lock:
            entry = self._specs.get(key)
        if entry is not None:
            self.hits += 1
            return entry
        entry = (parse_pod_spec(spec), {})
        with self._lock:
            if len(self._specs) >= self.size:
                self._specs.pop(next(iter(self._specs)))  # the oldest spec
            self._specs[key] = entry
        return entry

    def decode(self, obj: Mapping[str, Any]) -> Pod:
        """parse_pod with this cache; raises ValidationError as parse_pod does."""
        derived: dict[str, Any] | None = None

        def spec_fields(spec: Fields) -> SpecFields:
            nonlocal derived
            fields, derived = self._entry(spec)
            return fields

        pod = parse_pod(obj, SOURCE, spec_fields=spec_fields)
        if derived is not None:
            if derived:
                pod.__dict__.update(derived)  # the cached properties, as computed for this spec
            else:
                derived.update(requests=pod.requests, limits=pod.limits, qos_class=pod.qos_class)
        return pod


_SPECS = SpecCache()


def decode_pod(obj: dict[str, Any]) -> Pod | BadObject:
    try:
        return _SPECS.decode(obj)
    except ValidationError as exc:
        return _bad("Pod", obj, _field_message(exc))
    except Exception as exc:  # a parser bug must not stop the informer; report it as bad input
        return _bad("Pod", obj, f"cannot decode: {exc}")


# What decode_pod does not read: these may change without the pod being parsed again.
_TOP_PARSED_APART = frozenset({"metadata", "spec", "status"})
_META_UNREAD = frozenset({"resourceVersion", "managedFields", "generation"})
_SPEC_NODE_NAME = frozenset({"nodeName"})
_STATUS_READ = ("phase", "nominatedNodeName", "startTime")


def _without(data: Mapping[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


def _sections(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...] | None:
    """metadata, spec and status (a missing status reads as empty), or None if one is not an object."""
    status = obj.get("status")
    sections = (obj.get("metadata"), obj.get("spec"), {} if status is None else status)
    return sections if all(isinstance(section, Mapping) for section in sections) else None  # type: ignore[return-value]


def _differs_only_in_binding(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether `after` decodes as `before` does but for spec.nodeName: the rest of the object is
    equal apart from what decode_pod never reads (resourceVersion, managedFields, generation,
    status conditions and the status fields it does not take)."""
    old, new = _sections(before), _sections(after)
    if old is None or new is None:
        return False
    (b_meta, b_spec, b_status), (a_meta, a_spec, a_status) = old, new
    node = a_spec.get("nodeName")
    return (
        (node is None or isinstance(node, str))
        and _without(before, _TOP_PARSED_APART) == _without(after, _TOP_PARSED_APART)
        and _without(b_spec, _SPEC_NODE_NAME) == _without(a_spec, _SPEC_NODE_NAME)
        and _without(b_meta, _META_UNREAD) == _without(a_meta, _META_UNREAD)
        and all(b_status.get(key) == a_status.get(key) for key in _STATUS_READ)
    )


def decode_pod_update(obj: dict[str, Any], old: Pod | BadObject) -> Pod | BadObject:
    """A watched update of a pod. Its binding (the MODIFIED event after every bind) changes only
    spec.nodeName, the resourceVersion and the PodScheduled condition, so the pod decoded from
    its previous version is reused with the new node name instead of being parsed again; any
    other change is decoded in full."""
    if isinstance(old, Pod) and _differs_only_in_binding(old.raw, obj):
        # dataclasses.replace without re-running __init__ (as Pod.bound_to): every other field,
        # the cached requests included, is the previous version's
        bound = object.__new__(Pod)
        bound.__dict__.update(old.__dict__)
        bound.__dict__["node_name"] = obj["spec"].get("nodeName") or ""
        bound.__dict__["raw"] = obj
        return bound
    return decode_pod(obj)


def decode_node(obj: dict[str, Any]) -> Node | BadObject:
    try:
        return parse_node(obj, SOURCE)
    except ValidationError as exc:
        return _bad("Node", obj, _field_message(exc))
    except Exception as exc:
        return _bad("Node", obj, f"cannot decode: {exc}")


def decode_topology(obj: dict[str, Any]) -> NodeTopology | BadObject:
    try:
        return parse_node_topology(obj)
    except TopologyError as exc:
        return _bad("NodeResourceTopology", obj, str(exc))
    except Exception as exc:
        return _bad("NodeResourceTopology", obj, f"cannot decode: {exc}")


class EventRouter:
    """The informers' handlers: each event becomes an engine call."""

    def __init__(
        self,
        engine: Scheduler,
        report_bad_pod: Callable[[BadObject], None],
        pod_gone: Callable[[str], None] = lambda key: None,
    ) -> None:
        self.engine = engine
        self._report_bad_pod = report_bad_pod
        self._pod_gone = pod_gone  # e.g. the status writer forgets what it wrote for the pod
        self._reported: dict[str, tuple[str, str]] = {}  # key -> (uid, message) already reported

    # --- nodes ------------------------------------------------------------------------
    def node_added(self, node: Node | BadObject) -> None:
        if isinstance(node, BadObject):
            log.warning("node %s ignored: %s", node.name, node.message)
            self.engine.remove_node(node.name)
            return
        self.engine.update_node(node)

    def node_updated(self, old: Node | BadObject, new: Node | BadObject) -> None:
        self.node_added(new)

    def node_deleted(self, node: Node | BadObject) -> None:
        self.engine.remove_node(node.name)

    # --- NUMA topologies ---------------------------------------------------------------
    def topology_added(self, topology: NodeTopology | BadObject) -> None:
        if isinstance(topology, BadObject):
            log.warning("NodeResourceTopology %s ignored: %s", topology.name, topology.message)
            self.engine.update_topology(None, topology.name)
            return
        self.engine.update_topology(topology)

    def topology_updated(self, old: NodeTopology | BadObject, new: NodeTopology | BadObject) -> None:
        self.topology_added(new)

    def topology_deleted(self, topology: NodeTopology | BadObject) -> None:
        self.engine.update_topology(
            None, topology.node if isinstance(topology, NodeTopology) else topology.name
        )

    # --- pods -------------------------------------------------------------------------
    def pod_added(self, pod: Pod | BadObject) -> None:
        if isinstance(pod, BadObject):
            self._bad_pod(pod)
            return
        self._reported.pop(pod.key, None)
        self.engine.add_pod(pod)

    def pod_updated(self, old: Pod | BadObject, new: Pod | BadObject) -> None:
        self.pod_added(new)

    def pod_deleted(self, pod: Pod | BadObject) -> None:
        self._reported.pop(pod.key, None)
        self._pod_gone(pod.key)
        if isinstance(pod, BadObject):
            self.engine.remove_pod(Pod(name=pod.name, namespace=pod.namespace, uid=pod.uid))
        else:
            self.engine.remove_pod(pod)

    def _bad_pod(self, bad: BadObject) -> None:
        # Whatever was known of it before is void; it is not scheduled until it parses again.
        self.engine.remove_pod(Pod(name=bad.name, namespace=bad.namespace, uid=bad.uid))
        if bad.node_name or bad.scheduler_name not in self.engine.config.profiles:
            return
        if self._reported.get(bad.key) == (bad.uid, bad.message):
            return
        self._reported[bad.key] = (bad.uid, bad.message)
        log.warning("pod %s not scheduled: %s", bad.key, bad.message)
        self._report_bad_pod(bad)


def pod_informer(client: KubeClient, router: EventRouter) -> Informer[Pod | BadObject]:
    return Informer(
        client,
        PODS,
        field_selector=POD_FIELD_SELECTOR,
        decode=decode_pod,
        decode_update=decode_pod_update,
        on_add=router.pod_added,
        on_update=router.pod_updated,
        on_delete=router.pod_deleted,
        name="pods",
    )


def node_informer(client: KubeClient, router: EventRouter) -> Informer[Node | BadObject]:
    return Informer(
        client,
        NODES,
        decode=decode_node,
        on_add=router.node_added,
        on_update=router.node_updated,
        on_delete=router.node_deleted,
        name="nodes",
    )


def topology_informer(client: KubeClient, router: EventRouter) -> Informer[NodeTopology | BadObject]:
    return Informer(
        client,
        NODE_RESOURCE_TOPOLOGIES,
        decode=decode_topology,
        on_add=router.topology_added,
        on_update=router.topology_updated,
        on_delete=router.topology_deleted,
        name="noderesourcetopologies",
    )
