"""The PodSecurity plugin's configuration: defaults and exemptions, from kube's admission config file.

`--admission-control-config-file F` takes kube's AdmissionConfiguration (apiserver.config.k8s.io/v1) whose
`plugins` entry named PodSecurity holds a PodSecurityConfiguration inline (`configuration:`) or in a file
(`path:`, relative to F); a bare PodSecurityConfiguration document is read too. Any problem raises
ValueError naming the file and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .levels import LEVELS, MODES, LevelVersion, Policy, parse_level, parse_version

PLUGIN = "PodSecurity"
CONFIG_KIND = "PodSecurityConfiguration"
EXEMPTION_KINDS = ("usernames", "namespaces", "runtimeClasses")


@dataclass(frozen=True)
class Config:
    defaults: Policy = field(default_factory=Policy)
    exempt_usernames: frozenset[str] = field(default_factory=frozenset)
    exempt_namespaces: frozenset[str] = field(default_factory=frozenset)
    exempt_runtime_classes: frozenset[str] = field(default_factory=frozenset)


def load(path: Path) -> Config:
    import yaml

    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(document, Mapping):
        raise ValueError(f"{path}: expected an AdmissionConfiguration or a {CONFIG_KIND}")
    if document.get("kind") == CONFIG_KIND:
        return parse(document, str(path))
    if document.get("kind") != "AdmissionConfiguration":
        raise ValueError(
            f"{path}: kind: expected AdmissionConfiguration or {CONFIG_KIND}, got {document.get('kind')!r}"
        )
    for index, plugin in enumerate(document.get("plugins") or []):
        if not isinstance(plugin, Mapping) or plugin.get("name") != PLUGIN:
            continue
        where = f"{path}: plugins[{index}]"
        if isinstance(plugin.get("configuration"), Mapping):
            return parse(plugin["configuration"], f"{where}.configuration")
        if plugin.get("path"):
            return load(path.parent / str(plugin["path"]))
        raise ValueError(f"{where}: needs configuration or path")
    return Config()  # no PodSecurity entry: kube's defaults (privileged everywhere, no exemptions)


def parse(document: Mapping[str, Any], where: str) -> Config:
    """A PodSecurityConfiguration (pod-security.admission.config.k8s.io/v1): defaults and exemptions."""
    defaults = document.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise ValueError(f"{where}: defaults: expected a mapping")
    modes: dict[str, LevelVersion] = {}
    for mode in MODES:
        level_text = str(defaults.get(mode, "privileged"))
        version_text = str(defaults.get(f"{mode}-version", "latest"))
        level, minor = parse_level(level_text), parse_version(version_text)
        if level is None:
            raise ValueError(f"{where}: defaults.{mode}: {level_text!r} must be one of {', '.join(LEVELS)}")
        if minor is None:
            raise ValueError(f'{where}: defaults.{mode}-version: {version_text!r} must be "latest" or "v1.x"')
        modes[mode] = LevelVersion(level, minor)
    exemptions = document.get("exemptions") or {}
    if not isinstance(exemptions, Mapping):
        raise ValueError(f"{where}: exemptions: expected a mapping")
    lists: dict[str, frozenset[str]] = {}
    for kind in EXEMPTION_KINDS:
        values = exemptions.get(kind) or []
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise ValueError(f"{where}: exemptions.{kind}: expected a list of names")
        lists[kind] = frozenset(values)
    return Config(
        Policy(modes["enforce"], modes["audit"], modes["warn"]),
        lists["usernames"],
        lists["namespaces"],
        lists["runtimeClasses"],
    )
