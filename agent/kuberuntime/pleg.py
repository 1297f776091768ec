"""The runtime's table of live container processes, and the PLEG's relist over it.

`ProcessTable` maps (pod UID, container name) to the process the runtime started or adopted; the pod workers'
threads and the agent's PLEG loop read it concurrently, so it is locked. `relist_containers` polls a pod's
tracked processes (reaping exited children) and records each exit in the pod record, as the kubelet's generic
PLEG turns a relist into container-died events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from agent.kuberuntime.processes import UNKNOWN_EXIT_CODE, AdoptedProcess, ContainerProcess
from agent.pod.podrecord import RUNNING, TERMINATED, ContainerRecord, PodRecord, rfc3339


class ProcessTable:
    def __init__(self) -> None:
        self._procs: dict[tuple[str, str], ContainerProcess] = {}
        self._lock = threading.Lock()

    def get(self, uid: str, container: str) -> ContainerProcess | None:
        with self._lock:
            return self._procs.get((uid, container))

    def put(self, uid: str, container: str, proc: ContainerProcess) -> None:
        with self._lock:
            self._procs[(uid, container)] = proc

    def pop(self, uid: str, container: str) -> None:
        with self._lock:
            self._procs.pop((uid, container), None)

    def of_pod(self, uid: str) -> list[ContainerProcess]:
        with self._lock:
            return [p for (u, _), p in self._procs.items() if u == uid]

    def forget_pod(self, uid: str) -> None:
        with self._lock:
            for key in [k for k in self._procs if k[0] == uid]:
                del self._procs[key]


def mark_exited(c: ContainerRecord, code: int, reason: str, message: str, clock_now: float) -> None:
    c.state = TERMINATED
    c.exit_code = code
    c.reason = reason
    c.message = message
    c.finished_at = rfc3339()
    c.finished_clock = clock_now
    c.pid = None
    c.create_time = None


def relist_containers(table: ProcessTable, record: PodRecord, clock: Callable[[], float]) -> list[str]:
    """Poll the pod's running containers; record each exit. Returns the containers that stopped."""
    stopped = []
    for c in record.containers.values():
        if c.state != RUNNING:
            continue
        proc = table.get(record.uid, c.name)
        code = proc.poll() if proc is not None else UNKNOWN_EXIT_CODE
        if code is None:
            continue
        table.pop(record.uid, c.name)
        reason = "Completed" if code == 0 else "Error"
        if proc is None or isinstance(proc, AdoptedProcess):
            reason = "ContainerStatusUnknown" if code == UNKNOWN_EXIT_CODE else reason
        mark_exited(c, code, reason, "", clock())
        stopped.append(c.name)
    return stopped
