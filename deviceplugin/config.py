"""The device plugin's YAML configuration: parsing and validation.

Every error names the file and the field path (`config.yaml: resources[1].name: ...`)
so a bad config fails at start with a message a person can act on.

    version: v1
    kubeletDir: /var/lib/kubelet/device-plugins   # optional
    resources:
      - name: kubenode.io/cpu
        backend: cpu              # cpu | gpu | static
        replicas: 1               # time-slicing: advertise each device N times as <id>::<n>
        socket: kubenode-cpu.sock # optional socket file name in the kubelet dir
        cpu: {unit: thread, reserved: "0"}   # cdi: true pins under a kubelet, see docs/deviceplugin.md
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deviceplugin.gpuconfig import DEFAULT_CDI_SPEC_DIR, DEFAULT_PODRESOURCES_SOCKET, GpuOptions, parse_gpu
from kubenode import yamlload
from kubenode.cpuset import parse_cpuset
from kubenode.deviceapi import (
    DEFAULT_KUBELET_DIR,
    HEALTH_VALUES,
    HEALTHY,
    KUBELET_DIR_ENV,
    MAX_DEVICE_ID_LENGTH,
)
from kubenode.model.resources import extended_resource_name_problem

BACKENDS = ("cpu", "gpu", "static")


class ConfigError(ValueError):
    """A configuration problem; the message starts with `<file>: <field path>:`."""


@dataclass(frozen=True)
class CpuOptions:
    unit: str = "thread"  # "thread": one device per logical CPU; "core": one per physical core
    reserved: frozenset[int] = frozenset()  # CPUs kept for the system, never advertised
    sysfs_root: str = "/sys"
    # CDI pinning (deviceplugin.cdi): None = on when cdi_spec_dir exists. The hook path is a host path.
    cdi: bool | None = None
    cdi_spec_dir: str = DEFAULT_CDI_SPEC_DIR
    cdi_hook_path: str | None = None  # default: the kubenode next to this Python, else on PATH
    pod_resources_socket: str = DEFAULT_PODRESOURCES_SOCKET  # where freed CPU sets are learned
    cdi_prune_seconds: float = 30.0


@dataclass(frozen=True)
class DeviceNode:
    host_path: str
    container_path: str
    permissions: str = "rw"


@dataclass(frozen=True)
class MountSpec:
    host_path: str
    container_path: str
    read_only: bool = False


@dataclass(frozen=True)
class StaticDevice:
    id: str
    numa_nodes: tuple[int, ...] = ()
    device_nodes: tuple[DeviceNode, ...] = ()
    mounts: tuple[MountSpec, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    healthy: bool = True
    cdi_devices: tuple[str, ...] = ()  # qualified CDI names Allocate answers (vendor/class=name)


@dataclass(frozen=True)
class StaticOptions:
    devices: tuple[StaticDevice, ...] = ()
    # Control file: each non-comment line names an unhealthy device ID. Relative paths are in the kubelet dir.
    health_file: str | None = None


@dataclass(frozen=True)
class ResourceConfig:
    name: str
    backend: str
    replicas: int = 1
    socket: str = ""
    cpu: CpuOptions = CpuOptions()
    gpu: GpuOptions = field(default_factory=GpuOptions)
    static: StaticOptions = StaticOptions()


@dataclass(frozen=True)
class PluginConfig:
    resources: tuple[ResourceConfig, ...]
    kubelet_dir: str | None = None
    source: str = "<defaults>"


def default_socket_name(resource_name: str) -> str:
    return "kubenode-" + resource_name.replace("/", "-") + ".sock"


def resolve_kubelet_dir(flag: str | None, config: PluginConfig) -> str:
    """Precedence: --kubelet-dir flag > KUBENODE_KUBELET_DIR > config file > default."""
    return flag or os.environ.get(KUBELET_DIR_ENV) or config.kubelet_dir or DEFAULT_KUBELET_DIR


def default_config(backend: str = "cpu") -> PluginConfig:
    return parse_config({"resources": [{"name": f"kubenode.io/{backend}", "backend": backend}]})


def load_config(path: str | os.PathLike[str]) -> PluginConfig:
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror}") from None
    try:
        data = yamlload.load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    return parse_config(data, source=Path(path).name)


def parse_config(data: object, source: str = "<config>") -> PluginConfig:
    root = _Node(data if data is not None else {}, source, "")
    root.only("version", "kubeletDir", "resources")
    version = root.text("version", "v1")
    if version != "v1":
        root.fail("version", f"unsupported version {version!r} (expected v1)")
    resources = tuple(_parse_resource(item) for item in root.items("resources", required=True))
    if not resources:
        root.fail("resources", "at least one resource is required")
    _check_unique(root, resources)
    return PluginConfig(resources=resources, kubelet_dir=root.text("kubeletDir", None), source=source)


def _check_unique(root: _Node, resources: tuple[ResourceConfig, ...]) -> None:
    names: dict[str, int] = {}
    sockets: dict[str, int] = {}
    for index, resource in enumerate(resources):
        if resource.name in names:
            root.fail(f"resources[{index}].name", f"duplicate resource {resource.name!r}")
        if resource.socket in sockets:
            root.fail(f"resources[{index}].socket", f"socket {resource.socket!r} already used")
        names[resource.name] = index
        sockets[resource.socket] = index


def _parse_resource(node: _Node) -> ResourceConfig:
    node.only("name", "backend", "replicas", "socket", *BACKENDS)
    name = node.text("name", required=True)
    if (problem := extended_resource_name_problem(name)) is not None:
        node.fail("name", f"{name!r} {problem}")
    backend = node.text("backend", required=True)
    if backend not in BACKENDS:
        node.fail("backend", f"unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})")
    for other in BACKENDS:
        if other != backend and node.has(other):
            node.fail(other, f"options for backend {other!r} given but backend is {backend!r}")
    replicas = node.integer("replicas", 1)
    if replicas < 1:
        node.fail("replicas", "must be at least 1")
    socket = node.text("socket", default_socket_name(name))
    if not socket or "/" in socket or socket.startswith("."):
        node.fail("socket", f"{socket!r} must be a plain file name not starting with '.'")
    options = node.child(backend)
    resource = ResourceConfig(name=name, backend=backend, replicas=replicas, socket=socket)
    if backend == "cpu":
        return _replace(resource, cpu=_parse_cpu(options))
    if backend == "gpu":
        gpu = parse_gpu(options, name)
        if gpu.sharing != "none":
            if node.has("replicas"):
                node.fail("replicas", f"given beside gpu.sharing ({gpu.sharing}); set the replicas there")
            resource = _replace(resource, replicas=gpu.shared_replicas)
        return _replace(resource, gpu=gpu)
    return _replace(resource, static=_parse_static(options, replicas))


def _replace(resource: ResourceConfig, **changes: Any) -> ResourceConfig:
    return dataclasses.replace(resource, **changes)


def _parse_cpu(node: _Node) -> CpuOptions:
    cdi_keys = ("cdi", "cdiSpecDir", "cdiHookPath", "podResourcesSocket", "cdiPruneSeconds")
    node.only("unit", "reserved", "sysfsRoot", *cdi_keys)
    unit = node.text("unit", "thread")
    if unit not in ("thread", "core"):
        node.fail("unit", f"unknown unit {unit!r} (expected thread or core)")
    reserved_text = node.scalar_text("reserved", "")
    try:
        reserved = parse_cpuset(reserved_text)
    except ValueError as exc:
        node.fail("reserved", str(exc))
    hook_path = node.text("cdiHookPath", None)
    if hook_path is not None and not os.path.isabs(hook_path):
        node.fail("cdiHookPath", f"{hook_path!r} must be an absolute path (CDI runs hooks by path)")
    return CpuOptions(
        unit=unit,
        reserved=reserved,
        sysfs_root=node.text("sysfsRoot", "/sys"),
        cdi=node.flag("cdi", False) if node.has("cdi") else None,
        cdi_spec_dir=node.text("cdiSpecDir", DEFAULT_CDI_SPEC_DIR),
        cdi_hook_path=hook_path,
        pod_resources_socket=node.text("podResourcesSocket", DEFAULT_PODRESOURCES_SOCKET),
        cdi_prune_seconds=node.number("cdiPruneSeconds", 30.0) or 30.0,
    )


def _parse_static(node: _Node, replicas: int) -> StaticOptions:
    node.only("devices", "healthFile")
    devices: list[StaticDevice] = []
    seen: set[str] = set()
    suffix = len(f"::{replicas - 1}") if replicas > 1 else 0
    for item in node.items("devices", required=True):
        item.only("id", "numa", "deviceNodes", "mounts", "env", "health", "cdiDevices")
        device_id = item.scalar_text("id", "", required=True)
        if not device_id:
            item.fail("id", "must not be empty")
        if len(device_id) + suffix > MAX_DEVICE_ID_LENGTH:
            item.fail("id", f"{device_id!r} is longer than {MAX_DEVICE_ID_LENGTH} characters (with replicas)")
        if device_id in seen:
            item.fail("id", f"duplicate device ID {device_id!r}")
        seen.add(device_id)
        health = item.text("health", HEALTHY)
        if health not in HEALTH_VALUES:
            item.fail("health", f"{health!r} must be {' or '.join(HEALTH_VALUES)}")
        devices.append(
            StaticDevice(
                id=device_id,
                numa_nodes=_parse_numa(item),
                device_nodes=tuple(_parse_device_node(n) for n in item.items("deviceNodes", default=[])),
                mounts=tuple(_parse_mount(m) for m in item.items("mounts", default=[])),
                env=item.str_map("env"),
                healthy=health == HEALTHY,
                cdi_devices=_parse_cdi_names(item),
            )
        )
    return StaticOptions(devices=tuple(devices), health_file=node.text("healthFile", None))


def _parse_cdi_names(item: _Node) -> tuple[str, ...]:
    from kubenode.cdi.names import CdiNameError, parse_qualified_name

    names = item.raw("cdiDevices") if item.has("cdiDevices") else []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        item.fail("cdiDevices", "must be a list of CDI names (vendor/class=name)")
    for name in names:
        try:
            parse_qualified_name(name)
        except CdiNameError as exc:
            item.fail("cdiDevices", str(exc))
    return tuple(names)


def _parse_numa(item: _Node) -> tuple[int, ...]:
    if not item.has("numa"):
        return ()
    value = item.raw("numa")
    nodes = [value] if not isinstance(value, list) else value
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in nodes):
        item.fail("numa", f"{value!r} must be a NUMA node number or a list of them")
    return tuple(sorted(set(nodes)))


def _parse_device_node(node: _Node) -> DeviceNode:
    node.only("hostPath", "containerPath", "permissions")
    host = node.text("hostPath", required=True)
    permissions = node.text("permissions", "rw")
    if not permissions or set(permissions) - set("rwm"):
        node.fail("permissions", f"{permissions!r} must be made of r, w and m")
    return DeviceNode(host, node.text("containerPath", host), permissions)


def _parse_mount(node: _Node) -> MountSpec:
    node.only("hostPath", "containerPath", "readOnly")
    host = node.text("hostPath", required=True)
    return MountSpec(host, node.text("containerPath", host), node.flag("readOnly", False))


class _Node:
    """One mapping (or value) in the YAML tree with its field path, for precise error messages."""

    def __init__(self, value: object, source: str, path: str) -> None:
        self.value, self.source, self.path = value, source, path

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, message: str) -> Any:
        raise ConfigError(f"{self.source}: {self.where(key)}: {message}")

    def _mapping(self) -> Mapping[str, Any]:
        if not isinstance(self.value, Mapping):
            raise ConfigError(f"{self.source}: {self.path or '<top level>'}: must be a mapping")
        return self.value

    def only(self, *keys: str) -> None:
        for key in self._mapping():
            if key not in keys:
                self.fail(str(key), f"unknown field (expected one of {', '.join(keys)})")

    def has(self, key: str) -> bool:
        return key in self._mapping()

    def raw(self, key: str) -> Any:
        return self._mapping().get(key)

    def _get(self, key: str, required: bool) -> Any:
        value = self._mapping().get(key)
        if value is None and required:
            self.fail(key, "required field is missing")
        return value

    def text(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        value = self._get(key, required)
        if value is None:
            return default
        if not isinstance(value, str):
            self.fail(key, f"{value!r} must be a string")
        return value

    def scalar_text(self, key: str, default: str, *, required: bool = False) -> str:
        """A string, also accepting a bare number (YAML reads `id: 0` or `reserved: 0` as int)."""
        value = self._get(key, required)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, str | int):
            self.fail(key, f"{value!r} must be a string")
        return str(value)

    def integer(self, key: str, default: int) -> int:
        value = self._get(key, False)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"{value!r} must be an integer")
        return int(value)

    def number(self, key: str, default: float) -> float:
        value = self._get(key, False)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            self.fail(key, f"{value!r} must be a non-negative number")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, False)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, f"{value!r} must be true or false")
        return bool(value)

    def as_int(self) -> int:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ConfigError(f"{self.source}: {self.path}: {self.value!r} must be an integer")
        return self.value

    def child(self, key: str) -> _Node:
        return _Node(self._get(key, False) or {}, self.source, self.where(key))

    def items(self, key: str, *, required: bool = False, default: Any = None) -> Any:
        value = self._get(key, required)
        if value is None:
            return default
        if not isinstance(value, list):
            self.fail(key, "must be a list")
        return [_Node(item, self.source, f"{self.where(key)}[{i}]") for i, item in enumerate(value)]

    def str_map(self, key: str) -> dict[str, str]:
        value = self._get(key, False) or {}
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            self.fail(key, "must be a mapping of names to strings")
        return {k: str(v) for k, v in value.items()}
