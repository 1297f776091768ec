"""HollowFleet: N hollow nodes in this process, on one KubeClient.

Each node is wired as `build_agent` wires `kubenode agent --kubeconfig` (agent/daemon.py), less the
manifest directory, the status endpoint and the device manager's sockets: a `NodeAgent` over
`HollowCgroups` and a `HollowLauncher`, and a `ClusterMembership` joined over the shared client
with a `FakeDevicePlugin` for the Node status. `start()` starts the nodes one after another (each
registers, takes its Lease and opens its pod watch in its own threads); `stop()` stops them.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from agent.apis.config import AgentConfig
from agent.composition import compose_node
from agent.daemon import RunningAgent
from agent.hollow.standins import FakeDevicePlugin, HollowCgroups, HollowLauncher, Ledger
from agent.lifecycle.admission import host_allocatable
from agent.nodestatus.cluster import ClusterMembership
from kubenode import __version__
from kubenode.kubeclient import KubeClient
from kubenode.kubeclient import config as kubeconfig

log = logging.getLogger(__name__)

HOLLOW_LABEL = "kubenode.io/hollow"
# Per hollow node: its pod watch holds one connection for good; unary calls share the rest.
SPARE_CONNECTIONS = 32
# Unary requests on the wire at once, for all the nodes of a process (the others wait their turn):
# a kubelet sends every request over one HTTP/2 connection; the API server is one event loop, so
# more requests in flight only queue there. Unbounded, a slow second made hundreds of nodes' threads
# each open a TLS connection of their own, whose handshakes then timed out together (docs/scale.md).
MAX_CONNECTIONS = 32
# A hollow node's status writes are few at a time; the real agent's 8 writer threads each, times a
# thousand nodes, would be most of the process's threads.
STATUS_WRITERS = 2
# The kubelet's PLEG relist period (the agent's default is 0.5 s): each hollow node's loop wakes half
# as often.
RELIST_INTERVAL_S = 1.0
# Node starts are spread over one Lease period, as real kubelets start at different times: started
# together, a thousand nodes renew their Leases, post their status and resync their pods in the same
# instant every 10 s, and a thousand threads waking at once starve each other of the GIL.
START_SPREAD_S = 10.0


class HollowNode:
    def __init__(self, config: AgentConfig, client: KubeClient, ledger: Ledger) -> None:
        self.config = config
        self.plugin = FakeDevicePlugin()
        self.cluster = ClusterMembership.join(config, client, owns_client=False)
        self.launcher = HollowLauncher(config.node_name, ledger, time.time)
        agent = compose_node(
            config,
            HollowCgroups(),
            [self.cluster.source],
            allocatable=host_allocatable(config.max_pods),
            launcher=self.launcher,
            # As a kubemark hollow kubelet: a pod's ConfigMaps and ServiceAccount token (the
            # kube-api-access volume ServiceAccount admission adds) come from the API, else such a pod
            # would never leave FailedMount. Nothing is asked for a pod without them.
            objects=self.cluster.objects,
            tokens=self.cluster.tokens,
            api_endpoint=self.cluster.api_endpoint,
        )
        self.cluster.attach(agent, self.plugin, None, status_writers=STATUS_WRITERS)
        self.running = RunningAgent(config, agent, None, None, self.cluster)

    def start(self) -> None:
        self.running.start()
        self.plugin.register()

    def stop(self) -> None:
        self.running.stop()


class HollowFleet:
    def __init__(
        self,
        kubeconfig_path: Path,
        nodes: int,
        state_dir: Path,
        ledger: Ledger,
        *,
        prefix: str = "hollow-",
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        loaded = kubeconfig.load(kubeconfig_path)
        self.client = KubeClient(
            loaded,
            user_agent=f"kubenode-hollow/{__version__}",
            pool_size=nodes + SPARE_CONNECTIONS,
            max_connections=max_connections,
        )
        self.ledger = ledger
        self.nodes = [
            HollowNode(
                AgentConfig(
                    node_name=f"{prefix}{i}",
                    state_dir=state_dir / f"{prefix}{i}",
                    device_plugin_dir=None,
                    listen="",
                    kubeconfig=kubeconfig_path,
                    node_labels={HOLLOW_LABEL: "true"},
                    relist_interval=RELIST_INTERVAL_S,
                    # A hollow node has no pods of its own to guard against: every one would watch (and
                    # evict for) this machine's memory and disk.
                    eviction_monitoring_period=0,
                    node_features_dir=None,  # the host's feature files label the host's own node only
                ),
                self.client,
                ledger,
            )
            for i in range(nodes)
        ]
        self._started: list[HollowNode] = []

    def start(self, spread: float = START_SPREAD_S) -> None:
        """Start the nodes one after another, evenly over `spread` seconds."""
        began = time.monotonic()
        for i, node in enumerate(self.nodes):
            delay = began + spread * i / len(self.nodes) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            node.start()
            self._started.append(node)

    def stop(self) -> None:
        """Stop every node (pods are left as they are, as a stopped kubelet leaves them)."""
        threads = [threading.Thread(target=node.stop, daemon=True) for node in self._started]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        self._started.clear()
        self.client.close()
        self.ledger.flush()
