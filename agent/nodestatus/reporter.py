"""The Node object: registration and node-status updates, as the kubelet's kubelet_node_status.go does them.

Flow (one thread): register first: POST the Node (labels kubernetes.io/hostname, os, arch plus
--node-labels; --register-with-taints; the full status); a 409 means the Node exists, so GET
it and take it over (our labels are merged into it with a PATCH). Registration is retried
with backoff until it succeeds. Then every `update_frequency` (10 s) the status is computed
and PATCHed (strategic merge on nodes/<n>/status) only if something changed, or anyway once
`report_frequency` (5 min) has passed since the last write. `poke()` (a device plugin
registered, a device turned unhealthy, a plugin left) computes it at once, so allocatable
follows the device manager within a fraction of a second.

capacity: cpu, memory (this machine), pods (--max-pods), ephemeral-storage (the state
directory's filesystem) and every device-plugin resource with all its devices; allocatable:
the same minus --system-reserved and --kube-reserved, with only healthy devices counted. A
device resource reported before and now gone is reported as 0, as the kubelet does.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.apis.clusterflags import parse_reserved, taint_json
from agent.apis.config import AgentConfig
from agent.util.background import BackgroundLoop
from kubenode import __version__
from kubenode.hostnet import host_ip
from kubenode.kubeclient import NODES, AlreadyExists, KubeClient, KubeError
from kubenode.kubeclient.events import EventRecorder, ObjectReference
from kubenode.kubeclient.informer import Backoff
from kubenode.kubeclient.timefmt import rfc3339
from kubenode.model.quantity import format_amount
from kubenode.model.resources import CPU, MEMORY, PODS
from kubenode.nodeendpoints import STATUS_PORT_ANNOTATION

log = logging.getLogger(__name__)

EPHEMERAL_STORAGE = "ephemeral-storage"
# The Kubernetes release whose kubelet this agent follows; kubectl shows it in the VERSION column.
KUBELET_COMPAT_VERSION = "v1.37.0"
KUBELET_VERSION = f"{KUBELET_COMPAT_VERSION}+kubenode.{__version__}"
RUNTIME_VERSION = f"kubenode://{__version__}"
# status.declaredFeatures (KEP-5328, GA in 1.37), as a 1.37 kubelet declares them: only what the agent
# serves. ExtendWebSocketsToKubelet: its authenticated endpoint takes kubectl's WebSockets (exec and attach
# v5.channel.k8s.io, port-forward's SPDY-in-WebSocket) itself, so kube-apiserver proxies them through
# unchanged; without it kube-apiserver translates them to SPDY/3.1 upgrades, which the agent refuses (400).
DECLARED_FEATURES = ("ExtendWebSocketsToKubelet",)
ARCHES = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}

# type -> (status, reason, message) of a healthy kubelet (pkg/kubelet/nodestatus/setters.go).
CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)
# The kubelet's reasons and messages while the eviction manager reports pressure.
UNDER_PRESSURE = {
    "MemoryPressure": ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
    "DiskPressure": ("KubeletHasDiskPressure", "kubelet has disk pressure"),
    "PIDPressure": ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
}


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.partition("=")[2].strip().strip('"')
    return "Linux"


@dataclass(frozen=True)
class HostFacts:
    """What does not change while the agent runs."""

    ip: str
    hostname: str
    node_info: Mapping[str, str]
    arch: str


def host_facts() -> HostFacts:
    uname = os.uname()
    arch = ARCHES.get(platform.machine(), platform.machine())
    return HostFacts(
        ip=host_ip(),
        hostname=socket.gethostname(),
        node_info={
            "machineID": _read("/etc/machine-id"),
            "systemUUID": _read("/sys/class/dmi/id/product_uuid"),
            "bootID": _read("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": uname.release,
            "osImage": _os_image(),
            "containerRuntimeVersion": RUNTIME_VERSION,
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": arch,
        },
        arch=arch,
    )


def node_labels(config: AgentConfig, facts: HostFacts) -> dict[str, str]:
    return {
        "kubernetes.io/hostname": config.node_name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": facts.arch,
        **config.node_labels,
    }


def reserved(config: AgentConfig) -> dict[str, int]:
    """--system-reserved plus --kube-reserved, per resource."""
    total: dict[str, int] = {}
    for key, value in (("systemReserved", config.system_reserved), ("kubeReserved", config.kube_reserved)):
        for name, amount in parse_reserved(value, key=key).items():
            total[name] = total.get(name, 0) + amount
    return total


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {name: format_amount(name, amount) for name, amount in sorted(amounts.items())}


class NodeStatusReporter(BackgroundLoop):
    thread_name = "node-status"

    def __init__(
        self,
        client: KubeClient,
        config: AgentConfig,
        *,
        base_capacity: Mapping[str, int],
        device_capacity: Callable[[], Mapping[str, int]] = dict,
        device_allocatable: Callable[[], Mapping[str, int]] = dict,
        facts: HostFacts | None = None,
        port: int = 0,
        status_port: int = 0,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
        recorder: EventRecorder | None = None,
        pressure: Callable[[], Mapping[str, bool]] = dict,
    ) -> None:
        super().__init__()
        # MemoryPressure, DiskPressure, PIDPressure from the eviction manager (agent/eviction).
        self._pressure = pressure
        self.client = client
        self.config = config
        self.facts = facts or host_facts()
        # status.images, from the container runtime when there is one (agent/kuberuntime/cri/wiring.py).
        self.images: Callable[[], list[dict[str, Any]]] | None = None
        self.recorder = recorder
        self._announced = False  # the Starting event is recorded once, before the first registration
        self.port = port  # the authenticated daemon endpoint's, published as daemonEndpoints
        self.status_port = status_port  # the plain status endpoint's, published as STATUS_PORT_ANNOTATION
        self._base = dict(base_capacity)
        self._base.setdefault(EPHEMERAL_STORAGE, shutil.disk_usage(_existing(config.state_dir)).total)
        self._reserved = reserved(config)
        self._device_capacity = device_capacity
        self._device_allocatable = device_allocatable
        self._wall = wall
        self._clock = clock
        self.node_uid = ""
        self.registered = threading.Event()
        self.writes = 0  # status PATCHes sent (tests, metrics)
        self._reported_devices: set[str] = set()
        self._last_sent: dict[str, Any] | None = None
        self._last_sent_at = 0.0
        self._transitions: dict[str, str] = {}

    def poke(self) -> None:
        """Something in the status changed (devices): compute and send it now."""
        self._wake.set()

    # ----- what is reported --------------------------------------------------------------------

    def resources(self) -> tuple[dict[str, int], dict[str, int]]:
        """(capacity, allocatable) as integer amounts."""
        capacity = dict(self._base)
        capacity[PODS] = self.config.max_pods
        allocatable = dict(capacity)
        device_capacity = dict(self._device_capacity())
        device_allocatable = dict(self._device_allocatable())
        for name in self._reported_devices - set(device_capacity):
            device_capacity[name] = device_allocatable[name] = 0  # the plugin's resource is gone
        capacity.update(device_capacity)
        allocatable.update({n: device_allocatable.get(n, 0) for n in device_capacity})
        for name, amount in self._reserved.items():
            if name in allocatable:
                allocatable[name] = max(0, allocatable[name] - amount)
        return capacity, allocatable

    def status(self) -> dict[str, Any]:
        """The node status without heartbeat times (those are added when it is sent)."""
        capacity, allocatable = self.resources()
        self._reported_devices = {n for n in capacity if "/" in n}
        conditions = []
        pressure = self._pressure()
        for kind, status, reason, message in CONDITIONS:
            if pressure.get(kind):
                status, reason, message = "True", *UNDER_PRESSURE[kind]
            if kind == "Ready" and not all(capacity.get(r) for r in (CPU, MEMORY, PODS)):
                status, reason, message = "False", "KubeletNotReady", "missing cpu, memory or pods capacity"
            conditions.append({"type": kind, "status": status, "reason": reason, "message": message})
        return {
            "capacity": _quantities(capacity),
            "allocatable": _quantities(allocatable),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": self.facts.ip},
                {"type": "Hostname", "address": self.facts.hostname},
            ],
            "nodeInfo": dict(self.facts.node_info),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
            "declaredFeatures": list(DECLARED_FEATURES),
            **({"images": self.images()} if self.images is not None else {}),
        }

    def _stamped(self, status: Mapping[str, Any]) -> dict[str, Any]:
        now = rfc3339(self._wall())
        conditions = []
        for c in status["conditions"]:
            key = f"{c['type']}={c['status']}"
            since = self._transitions.get(c["type"], "")
            if not since.startswith(key + "@"):
                since = self._transitions[c["type"]] = f"{key}@{now}"
                if c["type"] == "Ready":
                    ready = "NodeReady" if c["status"] == "True" else "NodeNotReady"
                    self._node_event("Normal", ready, f"Node {self.config.node_name} status is now: {ready}")
            conditions.append({**c, "lastHeartbeatTime": now, "lastTransitionTime": since.partition("@")[2]})
        return {**status, "conditions": conditions}

    def node_object(self, status: Mapping[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if self.config.register_with_taints:
            spec["taints"] = [taint_json(t) for t in self.config.register_with_taints]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.config.node_name,
                "labels": node_labels(self.config, self.facts),
                "annotations": self._annotations(),
            },
            "spec": spec,
            "status": self._stamped(status),
        }

    def _annotations(self) -> dict[str, str]:
        return {STATUS_PORT_ANNOTATION: str(self.status_port)} if self.status_port else {}

    # ----- writing -----------------------------------------------------------------------------

    def register(self) -> dict[str, Any]:
        """POST the Node; if it exists, take it over (merge our labels in). Raises KubeError."""
        if not self._announced:
            self._announced = True
            self._node_event("Normal", "Starting", "Starting kubelet.")
        status = self.status()
        try:
            node = self.client.create(NODES, self.node_object(status))
            # What was sent is what later updates compare with: a device list that arrived since must
            # still count as a change (recording a fresh status here lost it until the 5 min report).
            self._last_sent, self._last_sent_at = status, self._clock()
            log.info("registered node %s", self.config.node_name)
        except AlreadyExists:
            labels = node_labels(self.config, self.facts)
            patch = {"metadata": {"labels": labels, "annotations": self._annotations()}}
            node = self.client.patch(NODES, self.config.node_name, patch)
            log.info("node %s exists; taking it over", self.config.node_name)
            self.update(force=True)  # its status is a previous run's (or the node controller's Unknown)
        self.node_uid = str((node.get("metadata") or {}).get("uid") or "")
        self.registered.set()
        return node

    def _node_event(self, kind: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            # The kubelet names its Node by name in both name and uid (kubectl describe looks for both).
            ref = ObjectReference("Node", self.config.node_name, uid=self.config.node_name)
            self.recorder.event(ref, kind, reason, message)

    def update(self, *, force: bool = False) -> bool:
        """Compute the status and PATCH it if changed (or due, or forced); True if it was sent."""
        status = self.status()
        due = self._clock() - self._last_sent_at >= self.config.node_status_report_frequency
        if not force and not due and status == self._last_sent:
            return False
        self.client.patch(
            NODES, self.config.node_name, {"status": self._stamped(status)}, subresource="status"
        )
        self._last_sent, self._last_sent_at = status, self._clock()
        self.writes += 1
        return True

    def _run(self) -> None:
        backoff = Backoff(0.2, self.config.api_backoff_max)
        while not self._stop.is_set():
            try:
                self.register()
                break
            except KubeError as exc:
                log.warning("registering node %s: %s", self.config.node_name, exc)
            except Exception:  # never let the node's status die with its thread
                log.exception("registering node %s", self.config.node_name)
            if self._stop.wait(backoff.next()):
                return
        while not self._stop.is_set():
            self._wake.wait(self.config.node_status_update_frequency)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.update()
            except Exception as exc:
                if isinstance(exc, KubeError):
                    log.warning("updating node status: %s", exc)
                else:  # a bug: logged in full, and the loop goes on
                    log.exception("updating node status")
                self._stop.wait(min(1.0, self.config.node_status_update_frequency))
                self._wake.set()  # try again soon: a changed status must not wait a whole period


def _existing(path: Path) -> Path:
    path = Path(path).absolute()
    while not path.exists():
        path = path.parent
    return path
