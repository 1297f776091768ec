"""The container manager (the kubelet's cm.ContainerManager): what a pod's containers get from the node.

It owns the CPU pool and holds the pod cgroups (`update_qos` sets the QoS tiers), the device manager and the
Topology Manager. Flow: syncPod calls `allocate(pod)`: every container's device-plugin resources
(kubenode.devicecontract's rule) through the device manager's Allocate, the exclusive CPUs the CPU plugin
answered in KUBENODE_CPUSET claimed in the CPU pool; the answer is the pod's cpuset (its exclusive CPUs, or
the shared pool), whether the shared pool changed (every other pod's cpuset is then rewritten), and each
container's `resources_for(pod, container)`: its merged Allocate answer with the pod's cpuset, one typed value
(agent/container/resources.py) that the runtime receives, whichever runtime runs it. `pre_start` is
PreStartContainer; `release` gives back what a terminated pod held. With DRA (agent/cm/dra), `allocate` first
prepares the pod's claims: their CDI IDs join the containers' resources, the CPUs of kubenode's CPU driver the
pod's exclusive cpuset; `unprepare_claims` runs once the pod's containers are gone.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agent.cm.cgroups import CgroupError, PodCgroups
from agent.cm.cpupool import CPUPool
from agent.cm.devicemanager import DeviceManagerError, PodRef
from agent.cm.topologymanager import TopologyManager
from agent.container.downwardapi import ContainerConfigError
from agent.container.resources import NO_RESOURCES, ContainerResources
from kubenode.cpuset import format_cpuset, parse_cpuset
from kubenode.devicecontract import CPUSET_ENV, device_plugin_limits
from kubenode.model import Pod

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceManager
    from agent.cm.dra.manager import DRAManager, PodDynamicResources

log = logging.getLogger("agent.node")


@dataclass(frozen=True)
class PodAllocation:
    """What `allocate` gave the pod."""

    cpuset: str | None  # the pod cgroup's cpuset (None: the parent's CPUs, no CPU is left in the shared pool)
    pool_changed: bool  # the pod took CPUs from the shared pool: the other pods' cpusets are rewritten
    resources: dict[str, ContainerResources]  # every container's, by name, with the cpuset
    with_devices: tuple[str, ...]  # the containers that hold devices


class ContainerManager:
    def __init__(
        self,
        cgroups: PodCgroups,
        devices: DeviceManager | None,
        topology: TopologyManager | None,
        cpu_pool: CPUPool | None = None,
        dra: DRAManager | None = None,
    ) -> None:
        self.cgroups = cgroups
        self.devices = devices
        self.dra = dra  # DRA drivers' claims (agent/cm/dra); None: no plugins registry directory
        self.topology = topology
        self.cpu_pool = cpu_pool if cpu_pool is not None else CPUPool()
        self._qos_lock = threading.Lock()

    def allocate(self, pod: Pod) -> PodAllocation:
        """Claims prepared, devices for every container and the pod's CPUs; ClaimPrepareError (agent/cm/dra)
        when a claim is not ready or its driver fails, DeviceManagerError when a plugin refuses."""
        dynamic = self._prepare_claims(pod)
        exclusive: set[int] = set(dynamic.cpus) if dynamic is not None else set()
        with_devices = [
            c.name for c in pod.all_containers if dynamic is not None and c.name in dynamic.containers
        ]
        ref = PodRef(pod.uid, pod.namespace, pod.name)
        for c in pod.all_containers:
            wanted = device_plugin_limits(c.limits)
            if not wanted:
                continue
            if self.devices is None:
                raise RuntimeError(
                    f"container {c.name} asks for {', '.join(wanted)} but no device manager runs"
                )
            options = self.devices.allocate(ref, c.name, wanted)
            if c.name not in with_devices:
                with_devices.append(c.name)
            if CPUSET_ENV in options.envs:
                exclusive |= parse_cpuset(options.envs[CPUSET_ENV])
        changed = bool(exclusive) and self.cpu_pool.assign(pod.uid, exclusive)
        cpuset = format_cpuset(exclusive) if exclusive else self.cpu_pool.shared()
        resources = {
            c.name: self.resources_for(pod, c.name, cpuset or "", dynamic) for c in pod.all_containers
        }
        return PodAllocation(cpuset, changed, resources, tuple(with_devices))

    def _prepare_claims(self, pod: Pod) -> PodDynamicResources | None:
        if self.dra is None:
            if pod.raw.get("spec", {}).get("resourceClaims"):
                from agent.cm.dra.errors import ClaimPrepareError

                raise ClaimPrepareError("the pod has resource claims but this agent watches no DRA drivers")
            return None
        return self.dra.prepare(pod)

    def resources_for(
        self, pod: Pod, container: str, cpuset: str | None = None, dynamic: PodDynamicResources | None = None
    ) -> ContainerResources:
        """The container's resources as allocated (the kubelet's GetResources), with the pod's cpuset: the one
        `allocate` just chose, or as the CPU pool stands now; the CDI IDs of its prepared claims appended."""
        if cpuset is None:
            exclusive = self.cpu_pool.exclusive(pod.uid)
            cpuset = format_cpuset(exclusive) if exclusive else self.cpu_pool.shared() or ""
        options = self.devices.run_options(pod.uid, container) if self.devices is not None else None
        resources = (options or NO_RESOURCES).with_cpuset(cpuset)
        if dynamic is None and self.dra is not None:
            dynamic = self.dra.resources(pod)
        cdi_ids = dynamic.cdi_ids(container) if dynamic is not None else []
        if cdi_ids:
            resources = replace(
                resources, cdi_devices=list(dict.fromkeys([*resources.cdi_devices, *cdi_ids]))
            )
        return resources

    def claim_holders(self) -> set[str]:
        """The pods the DRA checkpoint says hold claims (housekeeping unprepares those of unknown pods)."""
        return self.dra.holders() if self.dra is not None else set()

    def unprepare_claims(self, uid: str) -> None:
        """The pod's containers are gone: its claims are unprepared (ClaimPrepareError when a driver fails;
        the claim stays checkpointed and is retried)."""
        if self.dra is not None:
            self.dra.unprepare(uid)

    def pre_start(self, pod_uid: str, container: str) -> None:
        """PreStartContainer for the container's devices where their plugin asks for it."""
        if self.devices is None:
            return
        try:
            self.devices.pre_start(pod_uid, container)
        except DeviceManagerError as exc:
            raise ContainerConfigError(str(exc)) from None

    def update_qos(self, active: list[Pod]) -> None:
        """The QoS tiers' values for these active pods (a failure is logged: the next update retries)."""
        # Serialized: workers of different pods would otherwise race on the tier files.
        with self._qos_lock:
            try:
                self.cgroups.update_qos_cgroups(active)
            except CgroupError as exc:
                log.warning("updating QoS cgroups: %s", exc)

    def release(self, uid: str) -> bool:
        """Free the pod's devices, NUMA admission and CPUs; True when the shared pool changed."""
        if self.devices is not None:
            self.devices.free_pod(uid)
        if self.topology is not None:
            self.topology.remove_pod(uid)
        return self.cpu_pool.release(uid)
