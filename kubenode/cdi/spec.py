"""Reading one CDI spec file (JSON or YAML) into typed, validated objects; errors name the file and field.

`read_spec(path)` -> Spec, or SpecError("<path>: <field path>: <what is wrong>"). Checked as the CDI
reference library checks (tags.cncf.io/container-device-interface, SPEC.md 1.1.0): unknown fields are
refused (the library parses strictly); `cdiVersion` is a released version (0.1.0 ... 1.1.0, an optional
leading "v") at least as new as the fields used need (0.4.0 mount `type`, 0.5.0 `hostPath` and device
names starting with a digit, 0.6.0 annotations and a `.` in the class, 0.7.0 `intelRdt` and
`additionalGids`, 1.1.0 `netDevices` and intelRdt `schemata`/`enableMonitoring`); `kind` is
vendor/class; at least one device, names unique; each device has non-empty edits; env entries are
NAME=VALUE; device node types are b, c, u or p and permissions r/w/m combinations or "none"; hook names
are the OCI ones, with a path; mounts have both paths. A spec's own `containerEdits` may be empty.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from kubenode import yamlload
from kubenode.cdi.edits import HOOK_NAMES, NO_PERMISSIONS, ContainerEdits, DeviceNode, Hook, Mount, NetDevice
from kubenode.cdi.names import CdiNameError, check_device_name, parse_kind

VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
SPEC_SUFFIXES = (".json", ".yaml")
_T = TypeVar("_T")


class SpecError(ValueError):
    """A spec file that cannot be used: one line naming the file and the field."""


@dataclass(frozen=True)
class Device:
    name: str
    edits: ContainerEdits
    annotations: Mapping[str, str]


@dataclass(frozen=True)
class Spec:
    path: str
    version: str
    kind: str
    vendor: str
    device_class: str
    devices: tuple[Device, ...]
    edits: ContainerEdits  # applied once when any of its devices is used
    annotations: Mapping[str, str]


class _Fields:
    """A mapping being read; every error names the field by its path in the document."""

    def __init__(self, data: Any, where: str, allowed: tuple[str, ...]) -> None:
        if not isinstance(data, dict):
            raise SpecError(f"{where or 'the document'}: must be an object")
        unknown = sorted(str(key) for key in data if key not in allowed)
        if unknown:
            raise SpecError(f"{_at(where, unknown[0])}: unknown field")
        self.data, self.where = data, where

    def at(self, key: str) -> str:
        return _at(self.where, key)

    def get(self, key: str, kind: type[_T], default: _T) -> _T:
        value = self.data.get(key)
        if value is None:
            return default
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise SpecError(f"{self.at(key)}: must be {_KIND_NAMES[kind]}")
        return value

    def required(self, key: str, kind: type[_T]) -> _T:
        if self.data.get(key) in (None, ""):
            raise SpecError(f"{self.at(key)}: required")
        return self.get(key, kind, kind())

    def items(self, key: str, read: Callable[[Any, str], _T]) -> tuple[_T, ...]:
        return tuple(read(item, f"{self.at(key)}[{i}]") for i, item in enumerate(self.get(key, list, [])))

    def strings(self, key: str) -> tuple[str, ...]:
        return self.items(key, _string)

    def string_map(self, key: str) -> dict[str, str]:
        value = self.get(key, dict, {})
        for name, item in value.items():
            if not isinstance(item, str):
                raise SpecError(f"{self.at(key)}.{name}: must be a string")
        return dict(value)


_KIND_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object", bool: "true or false"}


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{where}: must be a string")
    return value


def _env(value: Any, where: str) -> str:
    text = _string(value, where)
    if text.find("=") <= 0:
        raise SpecError(f"{where}: {text!r} must be NAME=VALUE")
    return text


def _uint(fields: _Fields, key: str) -> int | None:
    if fields.data.get(key) is None:
        return None
    value = fields.get(key, int, 0)
    if not 0 <= value < 1 << 32:
        raise SpecError(f"{fields.at(key)}: {value} is out of range")
    return value


def _device_node(data: Any, where: str) -> DeviceNode:
    f = _Fields(
        data, where, ("path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid")
    )
    node_type = f.get("type", str, "")
    if node_type not in ("", "b", "c", "u", "p"):
        raise SpecError(f"{f.at('type')}: {node_type!r} must be b, c, u or p")
    permissions = f.get("permissions", str, "")
    if permissions not in ("", NO_PERMISSIONS) and set(permissions) - set("rwm"):
        raise SpecError(f'{f.at("permissions")}: {permissions!r} must combine r, w and m, or be "none"')
    numbers = [f.get(key, int, 0) for key in ("major", "minor")]
    if min(numbers) < 0:
        raise SpecError(f"{f.at('major' if numbers[0] < 0 else 'minor')}: must not be negative")
    return DeviceNode(
        path=f.required("path", str), host_path=f.get("hostPath", str, ""), type=node_type,
        major=numbers[0], minor=numbers[1], file_mode=_uint(f, "fileMode"), permissions=permissions,
        uid=_uint(f, "uid"), gid=_uint(f, "gid"),
    )  # fmt: skip


def _mount(data: Any, where: str) -> Mount:
    f = _Fields(data, where, ("hostPath", "containerPath", "options", "type"))
    return Mount(f.required("hostPath", str), f.required("containerPath", str), f.strings("options"),
                 f.get("type", str, ""))  # fmt: skip


def _hook(data: Any, where: str) -> Hook:
    f = _Fields(data, where, ("hookName", "path", "args", "env", "timeout"))
    name = f.required("hookName", str)
    if name not in HOOK_NAMES:
        raise SpecError(f"{f.at('hookName')}: {name!r} is not one of {', '.join(HOOK_NAMES)}")
    timeout = f.get("timeout", int, 0) if f.data.get("timeout") is not None else None
    if timeout is not None and timeout <= 0:
        raise SpecError(f"{f.at('timeout')}: must be greater than zero")
    return Hook(name, f.required("path", str), f.strings("args"), f.items("env", _env), timeout)


def _net_device(data: Any, where: str) -> NetDevice:
    f = _Fields(data, where, ("hostInterfaceName", "name"))
    return NetDevice(f.required("hostInterfaceName", str), f.required("name", str))


def _gid(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 32:
        raise SpecError(f"{where}: must be an integer from 0 to 4294967295")
    return value


_RDT = ("closID", "l3CacheSchema", "memBwSchema", "schemata", "enableMonitoring")
_EDITS = ("env", "deviceNodes", "mounts", "hooks", "intelRdt", "additionalGids", "netDevices")


def _edits(data: Any, where: str) -> ContainerEdits:
    if data is None:
        return ContainerEdits()
    f = _Fields(data, where, _EDITS)
    rdt = (
        _Fields(f.data["intelRdt"], f.at("intelRdt"), _RDT).data
        if f.data.get("intelRdt") is not None
        else None
    )
    return ContainerEdits(
        env=f.items("env", _env), device_nodes=f.items("deviceNodes", _device_node),
        mounts=f.items("mounts", _mount), hooks=f.items("hooks", _hook),
        additional_gids=f.items("additionalGids", _gid), net_devices=f.items("netDevices", _net_device),
        intel_rdt=rdt,
    )  # fmt: skip


def _device(data: Any, where: str) -> Device:
    f = _Fields(data, where, ("name", "annotations", "containerEdits"))
    name = f.required("name", str)
    try:
        check_device_name(name)
    except CdiNameError as exc:
        raise SpecError(f"{f.at('name')}: {exc}") from None
    edits = _edits(f.data.get("containerEdits"), f.at("containerEdits"))
    if edits.is_empty():
        raise SpecError(f"{f.at('containerEdits')}: a device needs at least one edit")
    return Device(name, edits, f.string_map("annotations"))


def _required_version(spec: Spec) -> str:
    """The oldest version that has every field this spec uses (the library's MinimumRequiredVersion)."""
    everything = [spec.edits, *(device.edits for device in spec.devices)]
    rdt = [edits.intel_rdt for edits in everything if edits.intel_rdt is not None]
    if any(edits.net_devices for edits in everything) or any(
        r.get("schemata") is not None or r.get("enableMonitoring") for r in rdt
    ):
        return "1.1.0"
    if rdt or any(edits.additional_gids for edits in everything):
        return "0.7.0"
    if spec.annotations or any(device.annotations for device in spec.devices) or "." in spec.device_class:
        return "0.6.0"
    digit_start = any(device.name[0].isdigit() for device in spec.devices)
    if digit_start or any(node.host_path for edits in everything for node in edits.device_nodes):
        return "0.5.0"
    if any(mount.type for edits in everything for mount in edits.mounts):
        return "0.4.0"
    return "0.3.0"


def parse_spec(document: Any, path: str) -> Spec:
    """A decoded spec document as a Spec; raises SpecError naming `path` and the field."""
    try:
        f = _Fields(document, "", ("cdiVersion", "kind", "annotations", "devices", "containerEdits"))
        version = f.required("cdiVersion", str).removeprefix("v")
        if version not in VERSIONS:
            raise SpecError(f"cdiVersion: {version!r} is not a released CDI version ({', '.join(VERSIONS)})")
        kind = f.required("kind", str)
        try:
            vendor, device_class = parse_kind(kind)
        except CdiNameError as exc:
            raise SpecError(f"kind: {exc}") from None
        devices = f.items("devices", _device)
        if not devices:
            raise SpecError("devices: a spec needs at least one device")
        seen: set[str] = set()
        for i, device in enumerate(devices):
            if device.name in seen:
                raise SpecError(f"devices[{i}].name: {device.name!r} is defined twice")
            seen.add(device.name)
        edits = _edits(f.data.get("containerEdits"), "containerEdits")
        spec = Spec(path, version, kind, vendor, device_class, devices, edits, f.string_map("annotations"))
        needed = _required_version(spec)
        if VERSIONS.index(needed) > VERSIONS.index(version):
            raise SpecError(f"cdiVersion: {version} is too old for the fields used; they need {needed}")
        return spec
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None


def read_spec(path: Path) -> Spec:
    """Read and check one spec file; JSON for `.json`, YAML otherwise."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"{path}: {exc.strerror}") from None
    try:
        document = json.loads(text) if path.suffix == ".json" else yamlload.load(text)
    except (ValueError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())
        raise SpecError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {detail}"
        ) from None
    return parse_spec(document, str(path))
