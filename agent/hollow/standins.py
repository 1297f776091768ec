"""What a hollow node has instead of processes, cgroups and a device plugin; and the ledger.

`HollowLauncher.spawn` returns a `HollowProcess` that "runs" until it is signalled (SIGTERM or
SIGKILL end it with 128+signal, as a container runtime reports it); its pid lies above any
kernel pid (pid_max is at most 2^22), so no real process can ever be signalled by mistake. The
`Ledger` notes every start and every signal-ended exit, per node and pod UID, one line each, so a
benchmark can check afterwards that each pod ran exactly once on exactly one node and that each
deletion reached its node. The launcher knows exactly when a pretend container starts and stops, so
it streams those events (`container_events`, as a CRI runtime's GetContainerEvents): the node's agent
then runs the Evented PLEG and relists only every 300 s (agent/kuberuntime/pleg/evented.py).
`HollowCgroups` satisfies `PodCgroups` with a dict in memory.
"""

from __future__ import annotations

import collections
import itertools
import signal
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from agent.cm.cgroups import PodCgroupInfo, ResourceConfig
from agent.cm.devicemanager import DeviceEvent
from agent.kuberuntime.identity import Identity
from agent.kuberuntime.pleg import (
    CONTAINER_STARTED,
    CONTAINER_STOPPED,
    ContainerEvent,
    ContainerEventHub,
    ContainerEventStream,
)
from agent.kuberuntime.processes import ContainerProcess
from kubenode.model import Container, Pod

if TYPE_CHECKING:
    from agent.cm.devicecgroup.rules import DeviceRule
    from agent.kuberuntime.securitycontext import ProcessSecurity
    from agent.volumemanager.namespace import NamespacePlan

FIRST_HOLLOW_PID = 1 << 30  # above pid_max (at most 4,194,304): never a real process


class Ledger:
    """Lines `start <node> <pod uid> <container>` and `stop <node> <pod uid> <container> <code>`.

    A note is appended to a list in memory (atomic under the GIL: no lock) and `flush()` writes what
    is noted so far. A lock held across each write cost seconds a note with a thousand nodes' threads
    in one process: its holder, back from the write, waited for the GIL while every other pod start
    waited for the lock (docs/scale.md)."""

    def __init__(self, out: IO[str] | None) -> None:
        self._out = out
        self._lines: collections.deque[str] = collections.deque()
        self._flushing = threading.Lock()

    def note(self, *words: str) -> None:
        if self._out is not None:
            self._lines.append(" ".join(words))

    def flush(self) -> None:
        if self._out is None:
            return
        with self._flushing:
            lines = self._lines
            while lines:
                self._out.write(lines.popleft() + "\n")
            self._out.flush()


class HollowProcess:
    def __init__(self, pid: int, create_time: float, on_exit: Callable[[int], None]) -> None:
        self.pid = pid
        self.create_time = create_time
        self._exit: int | None = None
        self._on_exit = on_exit

    def poll(self) -> int | None:
        return self._exit

    def end(self, sig: signal.Signals) -> None:
        if self._exit is None:
            self._exit = 128 + int(sig)
            self._on_exit(self._exit)


class HollowLauncher:
    """A node's `Launcher`: a start is a note in the ledger, a SIGTERM ends the pretend process."""

    _pids = itertools.count(FIRST_HOLLOW_PID)  # shared by every node of the process: pids stay unique

    def __init__(self, node: str, ledger: Ledger, clock: Callable[[], float]) -> None:
        self.node = node
        self.ledger = ledger
        self._clock = clock
        self._live: dict[int, HollowProcess] = {}
        self._lock = threading.Lock()
        self.events = ContainerEventHub()

    def container_events(self) -> ContainerEventStream:
        """Open a stream of this node's container starts and stops (the Evented PLEG reads it)."""
        return self.events.open()

    def spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        working_dir: str,
        log_path: Path,
        procs_files: Sequence[str],
        identity: Identity | None = None,
        security: ProcessSecurity | None = None,
        namespace: NamespacePlan | None = None,
        *,
        stdin_path: Path | None = None,
    ) -> ContainerProcess:
        pod_uid, container = (identity.pod_uid, identity.container) if identity else ("?", argv[0])
        pid = next(self._pids)

        def exited(code: int) -> None:
            with self._lock:
                self._live.pop(pid, None)
            self.ledger.note("stop", self.node, pod_uid, container, str(code))
            self.events.publish(ContainerEvent(pod_uid, container, CONTAINER_STOPPED))

        process = HollowProcess(pid, self._clock(), exited)
        with self._lock:
            self._live[pid] = process
        self.ledger.note("start", self.node, pod_uid, container)
        self.events.publish(ContainerEvent(pod_uid, container, CONTAINER_STARTED))
        return process

    def signal(self, pid: int, sig: signal.Signals) -> None:
        with self._lock:
            process = self._live.get(pid)
        if process is not None and sig in (signal.SIGTERM, signal.SIGKILL):
            process.end(sig)


class HollowCgroups:
    """`PodCgroups` in memory: a pod cgroup is a name in a dict; it never holds a pid."""

    def __init__(self) -> None:
        self._pods: dict[str, PodCgroupInfo] = {}
        self._lock = threading.Lock()

    def start(self, node_allocatable: Mapping[str, int]) -> None:
        pass

    def update_qos_cgroups(self, active_pods: Iterable[Pod]) -> None:
        pass

    def resource_config(self, pod: Pod, cpuset: str | None) -> ResourceConfig:
        return ResourceConfig(cpuset_cpus=cpuset)

    def name_for(self, pod: Pod) -> str:
        return f"/hollow/pod{pod.uid}"

    def exists(self, pod: Pod) -> bool:
        with self._lock:
            return pod.uid in self._pods

    def ensure(self, pod: Pod, cpuset: str | None = None) -> PodCgroupInfo:
        with self._lock:
            info = self._pods.get(pod.uid)
            if info is None:
                info = self._pods[pod.uid] = PodCgroupInfo(pod.uid, pod.qos_class, self.name_for(pod))
            return info

    def procs_files(self, pod: Pod) -> list[str]:
        return []

    def ensure_container(
        self, pod: Pod, container: Container, cpuset: str | None, device_rules: Sequence[DeviceRule]
    ) -> list[str]:
        return []

    def container_procs_files(self, pod: Pod, container: str) -> list[str]:
        return []

    def container_oom_kills(self, uid: str, container: str) -> int:
        return 0

    def describe_container(self, uid: str, container: str) -> dict[str, object]:
        return {}

    def pids(self, uid: str) -> set[int]:
        return set()

    def signal_all(self, uid: str, sig: int) -> int:
        return 0

    def destroy(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def list_pods(self) -> dict[str, PodCgroupInfo]:
        with self._lock:
            return dict(self._pods)

    def read_limits(self, uid: str) -> dict[str, str]:
        return {}

    def cpu_usage_ns(self, uid: str) -> int:
        return 0

    def memory_working_set(self, uid: str) -> int:
        return 0

    def pods_memory_working_set(self) -> int:
        return 0

    def oom_kills(self, uid: str) -> int:
        return 0

    def stop_and_remove_root(self) -> None:
        with self._lock:
            self._pods.clear()


class FakeDevicePlugin:
    """A plugin that registered `devices` healthy devices of one resource, as the Node status sees it."""

    def __init__(self, resource: str = "hollow.kubenode.io/gpu", devices: int = 8) -> None:
        self.resource = resource
        self.devices = devices
        self._listeners: list[Callable[[DeviceEvent], None]] = []

    def capacity(self) -> dict[str, int]:
        return {self.resource: self.devices}

    def allocatable(self) -> dict[str, int]:
        return {self.resource: self.devices}

    def add_listener(self, listener: Callable[[DeviceEvent], None]) -> None:
        self._listeners.append(listener)

    def register(self) -> None:
        """Tell the listeners the plugin registered (the Node status is computed again at once)."""
        for listener in self._listeners:
            listener(DeviceEvent("registered", self.resource))
