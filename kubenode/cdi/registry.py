"""The CDI devices on this node: every spec in the spec directories, by qualified name, and `resolve`.

Flow (wiring): when a container is created, the runtime calls
`load_registry().resolve(run_options.cdi_devices)` (the names the device plugins returned, deduplicated
by the device manager); the merged ContainerEdits (`.applied()`) give the container its env (before the
pod spec's env, after the plugins' envs, as containerd's CDI injection does), its device nodes (each a
device rule with `cgroup_access`, agent/cm/devicecgroup/rules.py, and a node in its /dev,
agent/kuberuntime/devfs.py), its mounts and its hooks. An unknown name fails the container with one
line naming it. The directories are read at each call (a plugin may have written its spec the moment
before Allocate answered); a node has a handful of small files.

Directory rules, as the CDI reference library (pkg/cdi/cache.go, spec-dirs.go) has them: directories in
priority order, `/etc/cdi` then `/var/run/cdi`; in each, the regular `*.json` and `*.yaml` files in
name order (no recursion; a missing directory is skipped). When two specs define the same qualified
device, the one in the later directory wins; two in the same directory conflict and the device is
dropped, both files named in the registry's errors, unless a later directory defines it again (the
library drops it even then; we let the later directory settle it, as the priority rule says). A spec
file that does not parse is recorded in `errors` and skipped: the other specs' devices stay usable.
Resolving: for each name in order, the spec-level edits of its spec (once per spec, on its first
device) and then the device's edits.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kubenode.cdi.edits import ContainerEdits
from kubenode.cdi.names import CdiNameError, parse_qualified_name, qualified_name
from kubenode.cdi.spec import SPEC_SUFFIXES, Device, Spec, SpecError, read_spec

SPEC_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


class UnresolvedDevices(LookupError):
    """One line naming every CDI device that could not be resolved, and why where known."""


@dataclass
class Registry:
    devices: dict[str, tuple[Spec, Device]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # one line each: a file or a conflict

    def resolve(self, names: Iterable[str]) -> ContainerEdits:
        """The merged edits for `names` (see the module's docstring), or UnresolvedDevices."""
        edits = ContainerEdits()
        used: set[str] = set()
        unknown: list[str] = []
        for name in names:
            try:
                parse_qualified_name(name)
            except CdiNameError as exc:
                unknown.append(str(exc))
                continue
            found = self.devices.get(name)
            if found is None:
                unknown.append(name)
                continue
            spec, device = found
            if spec.path not in used:
                used.add(spec.path)
                edits = edits.merged(spec.edits)
            edits = edits.merged(device.edits)
        if unknown:
            because = f" (spec errors: {'; '.join(self.errors)})" if self.errors else ""
            raise UnresolvedDevices(f"unresolvable CDI devices: {', '.join(unknown)}{because}")
        return edits


def _spec_files(directory: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except FileNotFoundError:
        return []
    return [Path(e.path) for e in entries if not e.is_dir() and os.path.splitext(e.name)[1] in SPEC_SUFFIXES]


def load_registry(spec_dirs: Sequence[Path] = SPEC_DIRS) -> Registry:
    registry = Registry()
    priority: dict[str, int] = {}
    conflicts: set[str] = set()
    for rank, directory in enumerate(spec_dirs):
        try:
            files = _spec_files(directory)
        except OSError as exc:
            registry.errors.append(f"{directory}: {exc.strerror}")
            continue
        for path in files:
            try:
                spec = read_spec(path)
            except SpecError as exc:
                registry.errors.append(str(exc))
                continue
            for device in spec.devices:
                name = qualified_name(spec.kind, device.name)
                if name in registry.devices and priority[name] == rank:
                    other = registry.devices[name][0].path
                    registry.errors.append(f"CDI device {name} is defined in both {other} and {spec.path}")
                    conflicts.add(name)
                    continue
                registry.devices[name] = (spec, device)
                priority[name] = rank
                conflicts.discard(name)  # a later directory's definition settles it
    for name in conflicts:
        del registry.devices[name]
    return registry
