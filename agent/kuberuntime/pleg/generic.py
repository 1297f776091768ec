"""The generic PLEG's side of the runtime: the table of live container processes, and the relist over it.

`ProcessTable` maps (pod UID, container name) to the process the runtime started or adopted, indexed by pod
(the relist asks per pod: a scan of every process for each pod made a relist quadratic in a node's pods); the
pod workers' threads and the agent's PLEG loop read it concurrently, so it is locked. `relist_containers`
polls a pod's tracked processes (reaping exited children) and records each exit in the pod record, as the
kubelet's generic PLEG turns a relist into container-died events.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from agent.container.podrecord import RUNNING, TERMINATED, ContainerRecord, PodRecord, rfc3339
from agent.kuberuntime.processes import UNKNOWN_EXIT_CODE, AdoptedProcess, ContainerProcess


class ProcessTable:
    def __init__(self) -> None:
        self._pods: dict[str, dict[str, ContainerProcess]] = {}  # pod UID -> container name -> process
        self._lock = threading.Lock()

    def get(self, uid: str, container: str) -> ContainerProcess | None:
        with self._lock:
            return self._pods.get(uid, {}).get(container)

    def put(self, uid: str, container: str, proc: ContainerProcess) -> None:
        with self._lock:
            self._pods.setdefault(uid, {})[container] = proc

    def pop(self, uid: str, container: str) -> None:
        with self._lock:
            procs = self._pods.get(uid)
            if procs is not None:
                procs.pop(container, None)
                if not procs:
                    del self._pods[uid]

    def of_pod(self, uid: str) -> list[ContainerProcess]:
        with self._lock:
            procs = self._pods.get(uid)
            return list(procs.values()) if procs else []

    def forget_pod(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)


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
