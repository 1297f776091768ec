"""Publishing the node's NodeResourceTopology (agent/cm/topologymanager/publish.py makes the object).

A thread builds the object from the device manager (every device with its health and NUMA node, what
every container holds) and the Topology Manager's policy and scope, and creates it or replaces it in
the API whenever it differs from what was last written; it then waits for the device manager's next
change (registration, health, an allocation or a freed pod) or `interval` seconds (which also bounds
how long `stop` waits for it). Failures are retried with a back-off doubling from `interval` to
RETRY_MAX_S, and logged once per distinct error (then at debug): a real kube-apiserver usually serves no
NodeResourceTopology CRD, or grants a node no access to it (403 for system:node:<name>), and the agent kept
warning every second there. The scheduler (scheduler/numa.py) reads the object.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.cm.topologymanager.numainfo import numa_info, sysfs_nodes
from agent.cm.topologymanager.publish import topology_object, zone_counts
from kubenode.kubeclient import NODE_RESOURCE_TOPOLOGIES, KubeClient, KubeError, NotFound

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceManager

log = logging.getLogger(__name__)

RETRY_MAX_S = 300.0  # the longest wait between tries after failures


class TopologyPublisher:
    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        devices: DeviceManager,
        policy: str,
        scope: str,
        sysfs_root: str,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.devices = devices
        self.policy, self.scope = policy, scope
        info = numa_info(sysfs_nodes(sysfs_root), sysfs_root, need_distances=False)
        self.numa_nodes, self.distances = info.nodes, {n: list(d) for n, d in info.distances.items()}
        self.interval = interval
        self.published: dict[str, Any] | None = None
        self.clock = clock
        self.failures = 0  # in a row
        self.retry_at = 0.0
        self._last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _signature(self) -> tuple[Any, ...]:
        allocations = tuple(
            (a.pod.uid, a.container, tuple(sorted(a.devices.items()))) for a in self.devices.allocations()
        )
        devices = tuple(
            (r.name, tuple((d.id, d.healthy, tuple(sorted(d.numa_nodes))) for d in r.devices))
            for r in self.devices.resources()
        )
        return allocations, devices

    def build(self) -> dict[str, Any]:
        taken: dict[str, set[str]] = {}
        accounted = set()
        for allocation in self.devices.allocations():
            accounted.add(f"{allocation.pod.namespace}/{allocation.pod.name}")
            for resource, ids in allocation.devices.items():
                taken.setdefault(resource, set()).update(ids)
        counts = {}
        for status in self.devices.resources():
            numa = {d.id: tuple(d.numa_nodes) for d in status.devices}
            healthy = [d.id for d in status.devices if d.healthy]
            free = [d for d in healthy if d not in taken.get(status.name, set())]
            per_node = zone_counts(numa, healthy, free)
            if per_node:
                counts[status.name] = per_node
        # A node only devices report (not in sysfs) is a zone too: the Topology Manager aligns on it.
        zones = {*self.numa_nodes, *(node for per_node in counts.values() for node in per_node)}
        return topology_object(
            self.node_name, self.policy, self.scope, zones, counts, self.distances, accounted
        )

    def publish_once(self) -> None:
        body = self.build()
        if body == self.published or self.clock() < self.retry_at:
            return
        try:
            try:
                current = self.client.get(NODE_RESOURCE_TOPOLOGIES, self.node_name)
            except NotFound:
                self.client.create(NODE_RESOURCE_TOPOLOGIES, body)
            else:
                updated = {**body, "metadata": {**body["metadata"], **_kept(current)}}
                self.client.update(NODE_RESOURCE_TOPOLOGIES, updated)
        except KubeError as exc:
            self.failures += 1
            delay = min(RETRY_MAX_S, self.interval * 2 ** min(self.failures - 1, 20))
            self.retry_at = self.clock() + delay
            text = str(exc)
            level = logging.DEBUG if text == self._last_error else logging.WARNING
            self._last_error = text
            log.log(level, "cannot publish NodeResourceTopology %s: %s (next try in %.0f s)",
                    self.node_name, exc, delay)  # fmt: skip
            return
        if self.failures:
            log.info("published NodeResourceTopology %s", self.node_name)
        self.failures, self.retry_at, self._last_error = 0, 0.0, ""
        self.published = body

    def _run(self) -> None:
        while not self._stop.is_set():
            self.publish_once()
            self._wait_for_change(self._signature())

    def _wait_for_change(self, last: tuple[Any, ...]) -> None:
        self.devices.wait_for(lambda: self._stop.is_set() or self._signature() != last, self.interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="topology-publisher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval + 5)


def _kept(current: dict[str, Any]) -> dict[str, Any]:
    meta = current.get("metadata") or {}
    return {k: meta[k] for k in ("resourceVersion", "uid", "labels", "annotations") if k in meta}
