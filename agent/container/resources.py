"""What a container runs with, beyond its spec: one typed value both runtimes receive.

The kubelet's RunContainerOptions (pkg/kubelet/container): the container manager
(agent/cm/containermanager.py) answers `resources_for(pod, container)` with the device plugins'
Allocate answers merged (env, device specs, mounts, annotations, CDI device names:
agent/cm/devicemanager/runoptions.py) and the cpuset the pod cgroup is pinned to. The process runtime
applies the env, the device specs (device cgroup rules and nodes in the container's own /dev) and the
mounts (agent/kuberuntime/isolation.py); the CRI runtime the env, devices, mounts, annotations, CDI
names and cpuset. Where the runtime does not apply CDI itself, agent/cm/cdidevices.py resolves the CDI
names into env, devices and mounts as the container is created and keeps the whole resolved edits in
`cdi_edits` (not saved: resolved again at each creation). The pod record keeps each device-holding
container's value (`to_json`/`from_json`) for the status endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kubenode.cdi.edits import ContainerEdits


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceSpec:
    container_path: str
    host_path: str
    permissions: str = "rwm"


@dataclass(frozen=True)
class ContainerResources:
    envs: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    devices: list[DeviceSpec] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: list[str] = field(default_factory=list)
    cpuset: str = ""  # the CPUs the pod cgroup is pinned to ("" where unpinned)
    # The CDI names' edits once the agent resolved them (agent/cm/cdidevices.py); None where it did not.
    # Their device nodes are the container's beside `devices` (which stay the plugins' DeviceSpecs).
    cdi_edits: ContainerEdits | None = None

    def with_cpuset(self, cpuset: str) -> ContainerResources:
        return replace(self, cpuset=cpuset)

    def to_json(self) -> dict[str, Any]:
        return {
            "envs": dict(self.envs),
            "mounts": [[m.container_path, m.host_path, m.read_only] for m in self.mounts],
            "devices": [[d.container_path, d.host_path, d.permissions] for d in self.devices],
            "annotations": dict(self.annotations),
            "cdiDevices": list(self.cdi_devices),
            "cpuset": self.cpuset,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ContainerResources:
        """The value `to_json` wrote; ValueError or TypeError on anything else."""
        return cls(
            envs={str(k): str(v) for k, v in dict(data.get("envs") or {}).items()},
            mounts=[Mount(str(c), str(h), bool(ro)) for c, h, ro in data.get("mounts") or []],
            devices=[DeviceSpec(str(c), str(h), str(p)) for c, h, p in data.get("devices") or []],
            annotations={str(k): str(v) for k, v in dict(data.get("annotations") or {}).items()},
            cdi_devices=[str(n) for n in data.get("cdiDevices") or []],
            cpuset=str(data.get("cpuset") or ""),
        )


NO_RESOURCES = ContainerResources()
