"""`compose_node`: the one place a NodeAgent is assembled (the daemon, `kubenode up`, hollow nodes, tests).

Flow: the Topology Manager over the device manager -> the container manager (CPU pool, devices, topology,
DRA claims, pod cgroups) -> the pod record store and the host's facts -> the process runtime, with the
container manager's PreStartContainer; with a CRI endpoint, the CRI runtime beside it and the selector over
both (agent/kuberuntime/cri/wiring.py), with the CDI resolver over the configured spec directories
(agent/cm/cdidevices.py) for a runtime that does not apply CDI -> the NodeAgent, handed every part.
Nothing is set on a part after it is built.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agent.apis.config import AgentConfig
from agent.cm.cdidevices import CdiDevices
from agent.cm.cgroups import PodCgroups
from agent.cm.containermanager import ContainerManager
from agent.cm.topologymanager.deviceprovider import topology_manager_for
from agent.config.sources import PodSource
from agent.container.downwardapi import HostInfo
from agent.container.podrecord import RecordStore
from agent.container.runtime import PodRuntime
from agent.container.security import SecurityPolicy
from agent.kuberuntime.processes import HOST_LAUNCHER, Launcher
from agent.kuberuntime.runtime import ProcessRuntime
from agent.lifecycle.admission import host_allocatable
from agent.node import NodeAgent
from agent.token.manager import TokenManager
from agent.util.backoff import CrashLoopBackoff
from agent.util.configobjects import NO_OBJECTS, ConfigObjects

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceManager
    from agent.cm.dra.manager import DRAManager


def compose_node(
    config: AgentConfig,
    cgroups: PodCgroups,
    sources: Sequence[PodSource],
    *,
    devices: DeviceManager | None = None,
    clock: Callable[[], float] = time.monotonic,
    allocatable: Mapping[str, int] | None = None,
    objects: ConfigObjects = NO_OBJECTS,
    launcher: Launcher = HOST_LAUNCHER,
    handler_of: Callable[[str], str] | None = None,
    tokens: TokenManager | None = None,
    api_endpoint: tuple[str, int] | None = None,
    dra: DRAManager | None = None,
) -> NodeAgent:
    """The agent with its parts; `handler_of` resolves a RuntimeClass to its CRI handler (with a CRI
    endpoint; by default a class names its own handler); `tokens` and `api_endpoint` (the cluster joined)
    give pods their ServiceAccount tokens and KUBERNETES_SERVICE_HOST/PORT."""
    topology = topology_manager_for(
        config.topology_manager_policy,
        config.topology_manager_scope,
        config.topology_manager_policy_options,
        str(config.sysfs_root),
        devices,
    )
    cm = ContainerManager(cgroups, devices, topology, dra=dra)
    cdi = CdiDevices([Path(d) for d in config.cdi_spec_dirs])
    store = RecordStore(config.state_dir)
    host = HostInfo(
        config.node_name,
        allocatable=dict(allocatable or host_allocatable(config.max_pods)),
        api_endpoint=api_endpoint,
    )
    process = ProcessRuntime(
        config.state_dir,
        store,
        host,
        backoff=CrashLoopBackoff(clock, initial=config.crash_loop_backoff_initial),
        clock=clock,
        pre_start=cm.pre_start,
        cgroup_pids=cgroups.pids,
        container_cgroups=cgroups,
        security=SecurityPolicy(config.allow_privileged, Path(config.state_dir) / "seccomp"),
        objects=objects,
        launcher=launcher,
        cdi=cdi.apply,
    )
    runtime: PodRuntime = process
    if config.container_runtime_endpoint:
        from agent.kuberuntime.cri.wiring import (
            cri_selector,  # grpc and the CRI client: only with an endpoint
        )

        runtime = cri_selector(config, process, cm.pre_start, handler_of, cdi.apply)
    return NodeAgent(config, cm, runtime, store, host, sources, objects=objects, tokens=tokens, clock=clock)
