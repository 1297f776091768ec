"""Wiring for a running agent: cgroups, device manager, manifest source, NodeAgent and the status endpoint.

`RunningAgent.start()` brings everything up in order (device manager first, so plugins can
register while the pods are read; the status endpoint last); `stop()` takes it down again.
By default stopping leaves the pods running, like the kubelet (and the systemd unit's
KillMode=process): a restarted agent adopts them. `run_agent` is `kubenode agent`.
"""

from __future__ import annotations

import functools
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.apis.config import AgentConfig, parse_listen
from agent.cm.devicemanager import PodInfo
from agent.composition import compose_node
from agent.config.sources import ManifestSource, PodSource
from agent.lifecycle.admission import host_allocatable
from agent.node import NodeAgent
from agent.server.httpapi import StatusServer
from agent.token.manager import TokenManager
from agent.util import memory
from agent.util.configobjects import NO_OBJECTS, ConfigObjects
from kubenode import __version__, sdnotify
from kubenode.stopsignal import STOP_CHECK_S

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceManager
    from agent.server.lazysecure import LazySecureServer

log = logging.getLogger(__name__)

PODRESOURCES_SOCKET = "pod-resources.sock"


@dataclass
class RunningAgent:
    config: AgentConfig
    agent: NodeAgent
    devices: DeviceManager | None
    server: StatusServer | None = None
    # Set when the agent joins a cluster (agent/nodestatus/cluster.py); typed loosely so the client stays
    # unimported.
    cluster: Any = None
    # The authenticated daemon endpoint, when joined (aiohttp is loaded on its first connection).
    secure: LazySecureServer | None = None
    # The DRA plugin watcher (agent/cm/dra/watcher.py), when joined with a plugins registry directory.
    dra_watcher: Any = None
    _started: list[str] = field(default_factory=list)

    def start(self) -> None:
        # The device manager and the agent are noted before they start, so that stop() also undoes a
        # start that failed half-way (the agent may have made its cgroup root already); their stop()
        # copes with that. Not the server: shutdown() of one that never served would wait forever.
        if self.devices is not None:
            self._started.append("devices")
            self.devices.start(functools.partial(active_pod_infos, self.agent))
        if self.cluster is not None:
            self._started.append("cluster")
            self.cluster.start_reporting()
        if self.dra_watcher is not None:
            self._started.append("dra")
            self.dra_watcher.start()
        self._started.append("agent")
        self.agent.start()
        if self.server is not None:
            self.server.start()
            self._started.append("server")
        if self.secure is not None:
            self.secure.start()
            self._started.append("secure")

    def stop(self, *, terminate_pods: bool = False) -> None:
        if "secure" in self._started and self.secure is not None:
            self.secure.stop()
        if "server" in self._started and self.server is not None:
            self.server.stop()
        if "agent" in self._started:
            self.agent.stop(terminate_pods=terminate_pods)
            if terminate_pods:
                self.agent.cm.cgroups.stop_and_remove_root()
        if "dra" in self._started:
            self.dra_watcher.stop()
        if "cluster" in self._started:
            self.cluster.stop()
        if "devices" in self._started and self.devices is not None:
            self.devices.stop()
        self._started.clear()


def active_pod_infos(agent: NodeAgent) -> list[PodInfo]:
    """The agent's active pods (admitted, not terminated) for PodResources, containers in the kubelet's order:
    sidecars (restartable init containers), then the regular containers."""
    return [
        PodInfo(
            pod.uid,
            pod.namespace,
            pod.name,
            tuple(c.name for c in pod.init_containers if c.is_sidecar)
            + tuple(c.name for c in pod.containers),
        )
        for pod in agent.active_pods()
    ]


def build_node_agent(
    config: AgentConfig,
    devices: DeviceManager | None,
    extra_sources: Sequence[PodSource] = (),
    objects: ConfigObjects = NO_OBJECTS,
    handler_of: Callable[[str], str] | None = None,
    tokens: TokenManager | None = None,
    api_endpoint: tuple[str, int] | None = None,
    dra: Any = None,
) -> NodeAgent:
    """The agent (cgroups, manifest source, device manager wiring) for `kubenode agent` and `kubenode up`;
    `handler_of`: the RuntimeClasses of the cluster joined; `dra`: its DRA manager (agent/cm/dra)."""
    from agent.cm.cgroups import make_pod_cgroups
    from agent.cm.cgroups.delegation import default_cgroup_root, leave_if_inside
    from agent.cm.cgroups.detect import CGROUP_MOUNT, detect_version

    version = detect_version(CGROUP_MOUNT)
    cgroup_root = config.cgroup_root or default_cgroup_root(config.cgroup_driver, version)
    # v2: the agent may not stay in a cgroup that is to hold pod cgroups (no internal processes).
    leave_if_inside(CGROUP_MOUNT, version, cgroup_root)
    cgroups = make_pod_cgroups(
        cgroup_root,
        "systemd" if config.cgroup_driver == "systemd" else "cgroupfs",
        pids_limit=config.pod_pids_limit,
    )
    source = ManifestSource(
        config.manifests, config.node_name, rescan_interval=config.manifest_rescan_interval
    )
    allocatable = host_allocatable(config.max_pods)
    if config.system_reserved or config.kube_reserved:
        from agent.nodestatus.reporter import reserved

        for name, amount in reserved(config).items():
            if name in allocatable:
                allocatable[name] = max(0, allocatable[name] - amount)
    return compose_node(
        config,
        cgroups,
        [source, *extra_sources],
        devices=devices,
        allocatable=allocatable,
        objects=objects,
        handler_of=handler_of,
        tokens=tokens,
        api_endpoint=api_endpoint,
        dra=dra,
    )


def build_dra(config: AgentConfig, client: Any) -> tuple[Any, Any]:
    """The DRA manager and its plugin watcher (grpc: only an agent that joins with a registry directory)."""
    from agent.cm.dra.checkpoint import ClaimStore
    from agent.cm.dra.manager import DRAManager
    from agent.cm.dra.plugins import DriverRegistry
    from agent.cm.dra.watcher import PluginWatcher
    from kubenode.kubeclient import RESOURCE_CLAIMS

    registry = DriverRegistry()
    manager = DRAManager(
        ClaimStore(config.state_dir),
        registry,
        lambda namespace, name: client.get(RESOURCE_CLAIMS, name, namespace),
    )
    assert config.plugins_registry_dir is not None
    watcher = PluginWatcher(config.plugins_registry_dir, registry, manager.retry_unprepare_quietly)
    return manager, watcher


def build_agent(config: AgentConfig) -> RunningAgent:
    cluster = None
    if config.joins_cluster:
        from agent.nodestatus.cluster import ClusterMembership

        cluster = ClusterMembership.connect(config)
    dra = dra_watcher = None
    if cluster is not None and config.plugins_registry_dir is not None:
        dra, dra_watcher = build_dra(config, cluster.client)
    devices = None
    if config.device_plugin_dir is not None:
        from agent.cm.devicemanager import DeviceManager  # grpc: only an agent with device plugins loads it

        dynamic = None
        if dra is not None:
            from agent.cm.dra.podresources import dynamic_lookup

            dynamic = dynamic_lookup(dra)
        devices = DeviceManager(
            config.device_plugin_dir,
            config.state_dir,
            podresources_socket=config.device_plugin_dir / PODRESOURCES_SOCKET,
            dynamic_resources=dynamic,
        )
    handler_of = None
    if cluster is not None and config.container_runtime_endpoint:
        from agent.kuberuntime.cri.wiring import runtime_class_handlers

        handler_of = runtime_class_handlers(cluster.client)
    agent = build_node_agent(
        config,
        devices,
        [cluster.source] if cluster is not None else [],
        cluster.objects if cluster is not None else NO_OBJECTS,
        handler_of,
        cluster.tokens if cluster is not None else None,
        cluster.api_endpoint if cluster is not None else None,
        dra,
    )
    from agent.server.metrics import AgentMetrics

    metrics = AgentMetrics(config.node_name, agent.views.pods)
    agent.observers.append(metrics.pod_synced)
    agent.prober.count = metrics.probe_counted
    if devices is not None:
        devices.add_listener(metrics.device_event)
    server = None
    if config.listen:
        host, port = parse_listen(config.listen)
        from agent.server.stats import StatsProvider

        stats = StatsProvider(agent.views.pods, agent.cm.cgroups, config.node_name, lambda: agent.runtime)
        server = StatusServer(
            host,
            port,
            agent.status_json,
            health=agent.health_problems,
            extra_routes={
                "/metrics": metrics.route,
                "/metrics/resource": stats.resource_metrics_route,
                "/stats/summary": stats.summary_route,
            },
        )
    secure = None
    if cluster is not None:
        from agent.server.secure import build_secure_server
        from agent.server.stats import StatsProvider
        from kubenode.hostnet import host_ip

        stats = StatsProvider(agent.views.pods, agent.cm.cgroups, config.node_name, lambda: agent.runtime)
        reads = {"/stats/summary": stats.summary_route, "/metrics/resource": stats.resource_metrics_route}
        secure = build_secure_server(config, agent, cluster.client, config.node_ip or host_ip(), reads)
        # The Node names the secure port (daemonEndpoints) and the status port (an annotation); both are
        # bound above, so a port 0 is known by now.
        cluster.attach(agent, devices, metrics, port=_port(secure), status_port=_port(server))
        if config.container_runtime_endpoint:
            from agent.kuberuntime.cri.wiring import join_cluster

            join_cluster(agent.runtime, cluster)
    return RunningAgent(config, agent, devices, server, cluster, secure, dra_watcher)


def _port(server: StatusServer | LazySecureServer | None) -> int:
    return int(server.address.rsplit(":", 1)[1]) if server is not None else 0


def run_agent(config: AgentConfig) -> int:
    memory.limit_malloc_arenas()  # before any thread of ours or gRPC's allocates
    running = build_agent(config)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    running.start()
    where = running.server.address if running.server else "no status endpoint"
    log.info(
        "kubenode %s agent on node %s: manifests %s, state %s, status %s",
        __version__,
        config.node_name,
        config.manifests,
        config.state_dir,
        where,
    )
    sdnotify.ready(f"watching {config.manifests}")
    interval = sdnotify.watchdog_interval()
    memory.release_free_memory()  # what starting up freed
    now = time.monotonic()
    next_release, next_watchdog = now + memory.RELEASE_INTERVAL_S, now + (interval or math.inf)
    # Waited in slices of STOP_CHECK_S (kubenode/stopsignal.py says why: one long wait left a SIGTERM to
    # systemd's SIGKILL). The release and the watchdog ping are due on the first slice past their time (a
    # ping at most STOP_CHECK_S late, well within WatchdogSec).
    while not stopping.wait(STOP_CHECK_S):
        now = time.monotonic()
        if now >= next_release:
            memory.release_free_memory()
            next_release = now + memory.RELEASE_INTERVAL_S
        if interval and now >= next_watchdog:
            next_watchdog = now + interval
            # Only a loop that still ticks counts as alive; otherwise systemd restarts us (pods survive that).
            alive = now - running.agent.last_tick < 2 * interval
            if alive and not running.agent.health_problems():
                sdnotify.watchdog()
    sdnotify.notify("STOPPING=1")
    running.stop()
    log.info("kubenode agent stopped; pods keep running")
    return 0
