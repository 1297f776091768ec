"""A node agent joined to a cluster: the pieces that talk to the API server, wired together.

`ClusterMembership.connect(config)` loads the kubeconfig (or the in-cluster service account)
and makes the client and the API pod source, which the agent gets as a second source next
to the manifest directory. `attach(agent, devices, metrics)` then adds, on top of that
agent: the Node registration and status (agent/nodestatus/reporter.py, poked by every device-plugin
change), the node Lease (agent/nodestatus/nodelease.py), the status manager with the event recorder
(agent/status/statusmanager.py, told of every sync), the prober's events, mirror pods for the static pods
(agent/nodestatus/mirrorpods.py), the node labeller of NFD's feature files (agent/nodestatus/nodefeatures.py,
with `nodeFeaturesDir`), and with a device manager the node's NodeResourceTopology
(agent/cm/topologymanager/publisher.py). `start()` starts them after the agent; `stop()` stops them
in reverse.

Everything here imports `kubenode.kubeclient`; the daemon imports this module only when the
agent joins a cluster, so a standalone agent never loads the client.
"""

from __future__ import annotations

import dataclasses
import logging
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from agent.apis.config import AgentConfig
from agent.config.apisource import ApiPodSource
from agent.lifecycle.admission import host_allocatable
from agent.token.apiclient import api_requester
from agent.token.manager import TokenManager
from agent.util.configobjects import CachedConfigObjects, api_fetcher
from kubenode import __version__
from kubenode.kubeclient import KubeClient, KubeConfigError
from kubenode.kubeclient import config as kubeconfig
from kubenode.kubeclient.events import EventRecorder, ObjectReference
from kubenode.model import Pod, ValidationError

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceEvent
    from agent.cm.topologymanager.publisher import TopologyPublisher
    from agent.node import NodeAgent
    from agent.nodestatus.mirrorpods import MirrorPods
    from agent.nodestatus.nodefeatures import NodeFeatureLabeller
    from agent.nodestatus.reporter import NodeStatusReporter
    from agent.server.metrics import AgentMetrics
    from agent.status.statusmanager import StatusManager
    from kubenode.kubeclient.lease import LeaseRenewer

log = logging.getLogger(__name__)


class DeviceReport(Protocol):
    """What the Node status reads of the devices: the DeviceManager, or a hollow node's fake plugin."""

    def capacity(self) -> dict[str, int]: ...

    def allocatable(self) -> dict[str, int]: ...

    def add_listener(self, listener: Callable[[DeviceEvent], None]) -> None: ...


@dataclass
class ClusterMembership:
    config: AgentConfig
    client: KubeClient
    source: ApiPodSource
    recorder: EventRecorder
    objects: CachedConfigObjects
    tokens: TokenManager
    reporter: NodeStatusReporter | None = None
    lease: LeaseRenewer | None = None
    status: StatusManager | None = None
    mirrors: MirrorPods | None = None
    topology: TopologyPublisher | None = None
    features: NodeFeatureLabeller | None = None
    owns_client: bool = True  # stop() closes the client
    _started: list[str] = field(default_factory=list)

    @classmethod
    def connect(cls, config: AgentConfig) -> ClusterMembership:
        """Load the config (KubeConfigError names the file) and make the client and the pod source."""
        try:
            loaded = kubeconfig.load(config.kubeconfig if not config.in_cluster else None)
        except KubeConfigError as exc:
            where = str(config.kubeconfig) if config.kubeconfig and not config.in_cluster else "--in-cluster"
            raise ValidationError(where, "", str(exc).removeprefix(f"{where}: ")) from None
        client = KubeClient(
            loaded, user_agent=f"kubenode-agent/{__version__} ({config.node_name})", pool_size=16
        )
        return cls.join(config, client)

    @classmethod
    def join(cls, config: AgentConfig, client: KubeClient, *, owns_client: bool = True) -> ClusterMembership:
        """The pod source and event recorder over `client` (hollow nodes share one: owns_client False)."""
        source = ApiPodSource(client, config.node_name, backoff_max=config.api_backoff_max)
        recorder = EventRecorder(client, "kubelet", config.node_name)
        # The ConfigMaps and Secrets of the pods' volumes and env, read one by one (the Node authorizer
        # lets a node read only those its pods reference).
        objects = CachedConfigObjects(api_fetcher(client), config.config_map_and_secret_ttl)
        # ServiceAccount tokens of the pods' projected volumes, requested as the node (NodeRestriction).
        tokens = TokenManager(api_requester(client))
        return cls(config, client, source, recorder, objects, tokens, owns_client=owns_client)

    @property
    def api_endpoint(self) -> tuple[str, int]:
        """The API server's address and port as this node reaches it: what its pods get as
        KUBERNETES_SERVICE_HOST/PORT (no Service proxy runs here to take them to the ClusterIP)."""
        url = urllib.parse.urlsplit(self.client.config.host)
        return url.hostname or "127.0.0.1", url.port or (443 if url.scheme == "https" else 80)

    def attach(
        self,
        agent: NodeAgent,
        devices: DeviceReport | None,
        metrics: AgentMetrics | None,
        *,
        port: int = 0,
        status_port: int = 0,
        status_writers: int | None = None,
    ) -> None:
        """Wire the Node, Lease, pod status and mirror pods to `agent`; status_writers: the status
        manager's writer threads (its default unless given; hollow nodes keep few)."""
        from agent.cm.devicemanager import DeviceManager
        from agent.nodestatus.mirrorpods import MirrorPods
        from agent.nodestatus.nodefeatures import NodeFeatureLabeller
        from agent.nodestatus.nodelease import node_lease
        from agent.nodestatus.reporter import NodeStatusReporter, host_facts
        from agent.status.statusmanager import WRITERS, StatusManager

        config = self.config
        facts = host_facts()
        if config.node_ip:
            facts = dataclasses.replace(facts, ip=config.node_ip)
        self.reporter = NodeStatusReporter(
            self.client,
            config,
            base_capacity=host_allocatable(config.max_pods),
            device_capacity=devices.capacity if devices is not None else dict,
            device_allocatable=devices.allocatable if devices is not None else dict,
            facts=facts,
            port=port,
            status_port=status_port,
            recorder=self.recorder,
            pressure=agent.evictions.pressure,
        )
        reporter = self.reporter
        agent.evictions.on_change = reporter.poke  # a pressure condition reaches the Node at once
        self.lease = node_lease(self.client, config, lambda: reporter.node_uid)
        if config.node_features_dir is not None:
            self.features = NodeFeatureLabeller(
                self.client,
                config.node_name,
                config.node_features_dir,
                registered=reporter.registered,
                backoff_max=config.api_backoff_max,
            )
        self.mirrors = MirrorPods(self.client, agent, config.node_name, lambda: reporter.node_uid)
        self.status = StatusManager(
            self.client,
            agent,
            facts.ip,
            recorder=self.recorder,
            metrics=metrics,
            mirror_of=self.mirrors.mirror_of,
            resync_interval=config.pod_status_resync_interval,
            backoff_max=config.api_backoff_max,
            writers=status_writers or WRITERS,
        )
        self.source.on_invalid = self.status.report_invalid
        self.source.on_mirrors = self.mirrors.mirrors_seen
        self.mirrors.on_mirrors_changed = self.status.resync
        agent.observers.append(self.status.pod_synced)
        agent.prober.events = self._probe_event
        agent.pod_event = self._pod_event
        if devices is not None:
            devices.add_listener(self._device_changed)
        if isinstance(devices, DeviceManager):  # a hollow node's fake plugin has no topology to publish
            from agent.cm.topologymanager.publisher import TopologyPublisher

            self.topology = TopologyPublisher(
                self.client,
                config.node_name,
                devices,
                config.topology_manager_policy,
                config.topology_manager_scope,
                str(config.sysfs_root),
            )

    def _probe_event(self, pod: Pod, container: str, kind: str, reason: str, message: str) -> None:
        """The prober's events (Unhealthy, ProbeWarning, Killing) about one container, as the kubelet's."""
        ref = ObjectReference(
            "Pod", pod.name, pod.namespace, pod.uid, "v1", f"spec.containers{{{container}}}"
        )
        self.recorder.event(ref, kind, reason, message)

    def _pod_event(self, pod: Pod, kind: str, reason: str, message: str) -> None:
        from kubenode.kubeclient.events import ObjectReference

        self.recorder.event(
            ObjectReference("Pod", pod.name, pod.namespace, pod.uid, "v1"), kind, reason, message
        )

    def _device_changed(self, event: DeviceEvent) -> None:
        if event.kind != "allocated" and self.reporter is not None:
            self.reporter.poke()

    def start_reporting(self) -> None:
        """Start what runs beside the agent (call after the agent started: its sources are running)."""
        for name, part in (
            ("recorder", self.recorder),
            ("reporter", self.reporter),
            ("lease", self.lease),
            ("status", self.status),
            ("mirrors", self.mirrors),
            ("topology", self.topology),
            ("features", self.features),
        ):
            if part is not None:
                part.start()
                self._started.append(name)

    def stop(self) -> None:
        parts = {
            "recorder": self.recorder,
            "reporter": self.reporter,
            "lease": self.lease,
            "status": self.status,
            "mirrors": self.mirrors,
            "topology": self.topology,
            "features": self.features,
        }
        for name in reversed(self._started):
            part = parts[name]
            if part is not None:
                part.stop()
        self._started.clear()
        if self.owns_client:
            self.client.close()
