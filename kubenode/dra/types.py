"""Typed views of the resource.k8s.io/v1 objects the allocator reads: DeviceClass, ResourceSlice, claims.

Flow: a JSON dict from the API (or a simulator file) goes through `parse_*`, which checks the
fields the allocator relies on and raises ValidationError naming the object and the field
(`spec.devices.requests[0].exactly.count`); the rest of the object is kept in `raw`. Field names
are kube's v1 names. Attribute and capacity names are qualified names: "domain/id", or a bare
"id" whose domain is the device's driver (kube's rule), so they are stored split by domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from kubenode.dra.semver import is_semver
from kubenode.model.errors import ValidationError, echo
from kubenode.model.quantity import QuantityError, to_fraction

EXACT_COUNT = "ExactCount"
ALL = "All"
ALLOCATION_MODES = (EXACT_COUNT, ALL)
MAX_SELECTOR_LENGTH = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength
ATTRIBUTE_KINDS = ("int", "bool", "string", "version")

AttributeValue = int | bool | str
# domain -> id -> value (attributes) or quantity text (capacity)
Attributes = Mapping[str, Mapping[str, tuple[str, AttributeValue]]]
Capacity = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class OpaqueConfig:
    requests: tuple[str, ...]  # empty: every request of the claim
    driver: str
    parameters: Any


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    extended_resource_name: str = ""


@dataclass(frozen=True, eq=False)
class Device:
    """Compared and hashed by identity. `memo` holds what is derived from the device and lives as long
    as it does (the scheduler's selector verdicts and CEL activation): a slice update brings new objects."""

    name: str
    attributes: Attributes = field(default_factory=dict)  # domain -> id -> (kind, value)
    capacity: Capacity = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str = ""
    node_selector: Mapping[str, Any] | None = None  # a core/v1 NodeSelector
    all_nodes: bool = False
    devices: tuple[Device, ...] = ()


@dataclass(frozen=True)
class Selection:
    """What one request or subrequest asks for: a class, extra selectors, how many."""

    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool = False


@dataclass(frozen=True)
class Request:
    name: str
    exactly: Selection | None = None
    first_available: tuple[tuple[str, Selection], ...] = ()  # (subrequest name, selection)


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...]  # empty: every request
    match_attribute: str


@dataclass(frozen=True)
class DeviceResult:
    request: str  # "request" or "request/subrequest"
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "request": self.request,
            "driver": self.driver,
            "pool": self.pool,
            "device": self.device,
        }
        if self.admin_access:
            out["adminAccess"] = True
        return out


@dataclass(frozen=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    requests: tuple[Request, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    allocation: tuple[DeviceResult, ...] | None = None  # None: not allocated
    reserved_for: tuple[Mapping[str, Any], ...] = ()
    deleting: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def with_state(
        self,
        allocation: tuple[DeviceResult, ...] | None,
        reserved_for: tuple[Mapping[str, Any], ...],
        raw: Mapping[str, Any],
        deleting: bool | None = None,
    ) -> ResourceClaim:
        """The claim with a new status (and `deleting` if given), its spec as it was: `replace()` without
        its per-field introspection, as the scheduler does this for every claim it writes."""
        return ResourceClaim(
            namespace=self.namespace,
            name=self.name,
            uid=self.uid,
            requests=self.requests,
            constraints=self.constraints,
            config=self.config,
            allocation=allocation,
            reserved_for=reserved_for,
            deleting=self.deleting if deleting is None else deleting,
            raw=raw,
        )


def _fail(source: str, path: str, message: str) -> ValidationError:
    return ValidationError(source, path, message)


def _map(value: Any, source: str, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _fail(source, path, f"must be an object, got {echo(value)}")
    return value


def _list(value: Any, source: str, path: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise _fail(source, path, f"must be a list, got {echo(value)}")
    return value


def _str(value: Any, source: str, path: str, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise _fail(source, path, f"must be a non-empty string, got {echo(value)}")
    return value


def _selectors(value: Any, source: str, path: str) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(_list(value, source, path)):
        where = f"{path}[{i}].cel.expression"
        expression = _str(
            _map(_map(item, source, f"{path}[{i}]").get("cel"), source, where).get("expression"),
            source,
            where,
        )
        if len(expression) > MAX_SELECTOR_LENGTH:
            raise _fail(source, where, f"longer than {MAX_SELECTOR_LENGTH} characters")
        out.append(expression)
    return tuple(out)


def _configs(value: Any, source: str, path: str) -> tuple[OpaqueConfig, ...]:
    out = []
    for i, item in enumerate(_list(value, source, path)):
        item = _map(item, source, f"{path}[{i}]")
        opaque = _map(item.get("opaque"), source, f"{path}[{i}].opaque")
        driver = _str(opaque.get("driver"), source, f"{path}[{i}].opaque.driver")
        requests = tuple(
            _str(r, source, f"{path}[{i}].requests")
            for r in _list(item.get("requests"), source, f"{path}[{i}].requests")
        )
        out.append(OpaqueConfig(requests, driver, opaque.get("parameters")))
    return tuple(out)


def _meta(obj: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    return _map(_map(obj, source, "").get("metadata"), source, "metadata")


def parse_device_class(obj: Mapping[str, Any], source: str = "") -> DeviceClass:
    meta = _meta(obj, source)
    name = _str(meta.get("name"), source, "metadata.name")
    source = source or f"DeviceClass {name}"
    spec = _map(obj.get("spec"), source, "spec")
    return DeviceClass(
        name,
        _selectors(spec.get("selectors"), source, "spec.selectors"),
        _configs(spec.get("config"), source, "spec.config"),
        _str(spec.get("extendedResourceName"), source, "spec.extendedResourceName", required=False),
    )


def split_qualified(name: str, driver: str) -> tuple[str, str]:
    """A qualified name as (domain, id): "domain/id", or a bare id in the driver's domain."""
    domain, slash, ident = name.rpartition("/")
    return (domain, ident) if slash else (driver, name)


def _attribute(value: Any, source: str, path: str) -> tuple[str, AttributeValue]:
    value = _map(value, source, path)
    present = [kind for kind in ATTRIBUTE_KINDS if kind in value]
    if len(present) != 1:
        raise _fail(source, path, f"exactly one of {', '.join(ATTRIBUTE_KINDS)} must be set")
    kind = present[0]
    got: Any = value[kind]
    expected: type | tuple[type, ...] = {"int": int, "bool": bool, "string": str, "version": str}[kind]
    if not isinstance(got, expected) or (kind == "int" and isinstance(got, bool)):
        raise _fail(source, f"{path}.{kind}", f"must be a {kind}, got {echo(got)}")
    typed = cast(AttributeValue, got)
    if kind == "version" and not is_semver(str(typed)):
        raise _fail(source, f"{path}.version", f"must be a semantic version, got {echo(got)}")
    return kind, typed


def _device(item: Any, driver: str, source: str, path: str) -> Device:
    item = _map(item, source, path)
    name = _str(item.get("name"), source, f"{path}.name")
    attributes: dict[str, dict[str, tuple[str, AttributeValue]]] = {}
    for key, value in _map(item.get("attributes"), source, f"{path}.attributes").items():
        domain, ident = split_qualified(key, driver)
        attributes.setdefault(domain, {})[ident] = _attribute(value, source, f"{path}.attributes[{key}]")
    capacity: dict[str, dict[str, str]] = {}
    for key, value in _map(item.get("capacity"), source, f"{path}.capacity").items():
        where = f"{path}.capacity[{key}].value"
        text = _map(value, source, f"{path}.capacity[{key}]").get("value")
        try:
            to_fraction(text)
        except QuantityError as exc:
            raise _fail(source, where, str(exc)) from None
        domain, ident = split_qualified(key, driver)
        capacity.setdefault(domain, {})[ident] = str(text)
    return Device(name, attributes, capacity)


def parse_resource_slice(obj: Mapping[str, Any], source: str = "") -> ResourceSlice:
    meta = _meta(obj, source)
    name = _str(meta.get("name"), source, "metadata.name")
    source = source or f"ResourceSlice {name}"
    spec = _map(obj.get("spec"), source, "spec")
    driver = _str(spec.get("driver"), source, "spec.driver")
    pool = _map(spec.get("pool"), source, "spec.pool")
    node_name = _str(spec.get("nodeName"), source, "spec.nodeName", required=False)
    selector = spec.get("nodeSelector")
    all_nodes = spec.get("allNodes") is True
    if sum((bool(node_name), selector is not None, all_nodes)) != 1:
        raise _fail(source, "spec", "exactly one of nodeName, nodeSelector, allNodes must be set")
    generation, count = pool.get("generation", 0), pool.get("resourceSliceCount", 1)
    for key, number in (("generation", generation), ("resourceSliceCount", count)):
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise _fail(source, f"spec.pool.{key}", f"must be a non-negative integer, got {echo(number)}")
    devices = tuple(
        _device(item, driver, source, f"spec.devices[{i}]")
        for i, item in enumerate(_list(spec.get("devices"), source, "spec.devices"))
    )
    return ResourceSlice(
        name,
        driver,
        _str(pool.get("name"), source, "spec.pool.name"),
        generation,
        count,
        node_name,
        _map(selector, source, "spec.nodeSelector") if selector is not None else None,
        all_nodes,
        devices,
    )


def _selection(item: Mapping[str, Any], source: str, path: str) -> Selection:
    mode = item.get("allocationMode") or EXACT_COUNT
    if mode not in ALLOCATION_MODES:
        raise _fail(
            source,
            f"{path}.allocationMode",
            f"must be one of {', '.join(ALLOCATION_MODES)}, got {echo(mode)}",
        )
    count = item.get("count", 1 if mode == EXACT_COUNT else 0)
    if not isinstance(count, int) or isinstance(count, bool) or (mode == EXACT_COUNT and count < 1):
        raise _fail(source, f"{path}.count", f"must be a positive integer, got {echo(count)}")
    return Selection(
        _str(item.get("deviceClassName"), source, f"{path}.deviceClassName"),
        _selectors(item.get("selectors"), source, f"{path}.selectors"),
        mode,
        count,
        item.get("adminAccess") is True,
    )


def _request(item: Any, source: str, path: str) -> Request:
    item = _map(item, source, path)
    name = _str(item.get("name"), source, f"{path}.name")
    exactly, first = item.get("exactly"), item.get("firstAvailable")
    if (exactly is None) == (first is None):
        raise _fail(source, path, "exactly one of exactly, firstAvailable must be set")
    if exactly is not None:
        return Request(name, _selection(_map(exactly, source, f"{path}.exactly"), source, f"{path}.exactly"))
    subs = []
    for i, sub in enumerate(_list(first, source, f"{path}.firstAvailable")):
        where = f"{path}.firstAvailable[{i}]"
        sub = _map(sub, source, where)
        subs.append((_str(sub.get("name"), source, f"{where}.name"), _selection(sub, source, where)))
    if not subs:
        raise _fail(source, f"{path}.firstAvailable", "must not be empty")
    return Request(name, first_available=tuple(subs))


def _results(allocation: Mapping[str, Any], source: str) -> tuple[DeviceResult, ...]:
    path = "status.allocation.devices.results"
    devices = _map(allocation.get("devices"), source, "status.allocation.devices")
    out = []
    for i, item in enumerate(_list(devices.get("results"), source, path)):
        item = _map(item, source, f"{path}[{i}]")
        request, driver, pool, device = (
            _str(item.get(key), source, f"{path}[{i}].{key}")
            for key in ("request", "driver", "pool", "device")
        )
        out.append(DeviceResult(request, driver, pool, device, item.get("adminAccess") is True))
    return tuple(out)


def parse_resource_claim(obj: Mapping[str, Any], source: str = "") -> ResourceClaim:
    meta = _meta(obj, source)
    name = _str(meta.get("name"), source, "metadata.name")
    namespace = _str(meta.get("namespace") or "default", source, "metadata.namespace")
    source = source or f"ResourceClaim {namespace}/{name}"
    devices = _map(_map(obj.get("spec"), source, "spec").get("devices"), source, "spec.devices")
    requests = tuple(
        _request(item, source, f"spec.devices.requests[{i}]")
        for i, item in enumerate(_list(devices.get("requests"), source, "spec.devices.requests"))
    )
    constraints = []
    for i, item in enumerate(_list(devices.get("constraints"), source, "spec.devices.constraints")):
        where = f"spec.devices.constraints[{i}]"
        item = _map(item, source, where)
        if item.get("distinctAttribute") is not None:
            raise _fail(
                source, f"{where}.distinctAttribute", "is not supported (feature gate DRAConsumableCapacity)"
            )
        constraints.append(
            Constraint(
                tuple(
                    _str(r, source, f"{where}.requests")
                    for r in _list(item.get("requests"), source, f"{where}.requests")
                ),
                _str(item.get("matchAttribute"), source, f"{where}.matchAttribute"),
            )
        )
    status = _map(obj.get("status"), source, "status")
    allocation = status.get("allocation")
    return ResourceClaim(
        namespace,
        name,
        str(meta.get("uid") or ""),
        requests,
        tuple(constraints),
        _configs(devices.get("config"), source, "spec.devices.config"),
        None if allocation is None else _results(_map(allocation, source, "status.allocation"), source),
        tuple(
            _map(r, source, "status.reservedFor")
            for r in _list(status.get("reservedFor"), source, "status.reservedFor")
        ),
        bool(meta.get("deletionTimestamp")),
        obj,
    )


def with_status(claim: ResourceClaim, raw: Mapping[str, Any]) -> ResourceClaim:
    """The claim with the status and metadata of `raw`, its spec as parsed before (a status write).

    Metadata too: a status write can land after the claim's deletion began, and the allocator must see
    `deleting` (kube's allocator skips claims being deleted)."""
    source = f"ResourceClaim {claim.key}"
    status = _map(raw.get("status"), source, "status")
    meta = _map(raw.get("metadata"), source, "metadata")
    allocation = status.get("allocation")
    reserved = _list(status.get("reservedFor"), source, "status.reservedFor")
    return claim.with_state(
        None if allocation is None else _results(_map(allocation, source, "status.allocation"), source),
        tuple(_map(r, source, "status.reservedFor") for r in reserved),
        raw,
        deleting=bool(meta.get("deletionTimestamp")),
    )


DraObject = DeviceClass | ResourceSlice | ResourceClaim
# kind -> parser, for whatever reads mixed objects (the simulator's file, the scheduler's informers)
PARSERS: Mapping[str, Callable[[Mapping[str, Any], str], DraObject]] = {
    "DeviceClass": parse_device_class,
    "ResourceSlice": parse_resource_slice,
    "ResourceClaim": parse_resource_claim,
}
