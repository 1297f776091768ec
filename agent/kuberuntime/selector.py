"""`RuntimeSelector`: one runtime interface over the process runtime and the CRI runtime, chosen per pod.

With a container runtime endpoint every pod runs through CRI (agent/kuberuntime/cri/), except a pod whose
`runtimeClassName` names a RuntimeClass whose handler is `kubenode-process` (PROCESS_HANDLER): it runs as host
processes (runtime.ProcessRuntime), as every pod does on an agent without an endpoint. The class is looked up
through `handler_of` (the API server's node.k8s.io/v1 RuntimeClass when the agent joins a cluster; standalone,
the class name is taken as the handler). A pod keeps the runtime its first sync chose; a restarted agent asks
the CRI runtime whether it holds a sandbox of the pod. syncPod, the PLEG, termination and adoption call the
same methods whichever runtime runs the pod; anything else is the process runtime's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.container.execresult import ExecResult, ExecRunner
from agent.container.podrecord import PodRecord
from agent.container.resources import ContainerResources
from agent.container.runtime import PodKillTarget
from agent.container.security import SecurityPolicy
from agent.container.streaming import StreamFlags
from agent.container.usage import CgroupReading, PodUsage
from agent.container.volumes import MountedVolume
from agent.kuberuntime.cri.runtime import CRIRuntime
from agent.kuberuntime.execsync import MAX_OUTPUT_BYTES
from agent.kuberuntime.runtime import ProcessRuntime
from agent.prober.handlers import ProbeError
from agent.util.backoff import CrashLoopBackoff
from kubenode.model import Pod

log = logging.getLogger(__name__)

PROCESS_HANDLER = "kubenode-process"

Runtime = ProcessRuntime | CRIRuntime


def runtime_class_name(pod: Pod) -> str:
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    name = (spec or {}).get("runtimeClassName")
    return name if isinstance(name, str) else ""


def _own_name(name: str) -> str:
    """Standalone: a RuntimeClass names its own handler."""
    return name


class RuntimeSelector:
    def __init__(
        self, process: ProcessRuntime, cri: CRIRuntime, handler_of: Callable[[str], str] | None = None
    ) -> None:
        self.process = process
        self.cri = cri
        # RuntimeClass name -> handler; raises LookupError for a class that does not exist.
        self.handler_of: Callable[[str], str] = handler_of if handler_of is not None else _own_name
        self._owner: dict[str, Runtime] = {}
        self._lock = threading.Lock()

    @property
    def backoff(self) -> CrashLoopBackoff:
        return self.process.backoff  # shared: the CRI runtime was given the same one

    def __getattr__(self, name: str) -> Any:
        return getattr(self.process, name)  # backoff, processes, log_path, ...: the process runtime's

    def choose(self, pod: Pod) -> Runtime:
        with self._lock:
            owner = self._owner.get(pod.uid)
        if owner is not None:
            return owner
        name = runtime_class_name(pod)
        chosen: Runtime = self.cri
        if name:
            try:
                handler = self.handler_of(name)
            except LookupError as exc:
                raise RuntimeError(f"RuntimeClass {name!r}: {exc}") from None
            chosen = self.process if handler == PROCESS_HANDLER else self.cri
        with self._lock:
            return self._owner.setdefault(pod.uid, chosen)

    def _of(self, uid: str) -> Runtime | None:
        with self._lock:
            return self._owner.get(uid)

    def sync_containers(
        self,
        pod: Pod,
        record: PodRecord,
        procs_files: Sequence[str],
        resources: Mapping[str, ContainerResources],
        cancelled: threading.Event | None = None,
        volumes: Mapping[str, MountedVolume] | None = None,
        *,
        fresh_cgroup: bool = False,
    ) -> float | None:
        return self.choose(pod).sync_containers(
            pod, record, procs_files, resources, cancelled, volumes, fresh_cgroup=fresh_cgroup
        )

    def pod_logs_dir(self, namespace: str, name: str, uid: str) -> Path:
        owner = self._of(uid) or self.process
        return owner.pod_logs_dir(namespace, name, uid)

    def remove_logs(self, namespace: str, name: str, uid: str) -> None:
        self.process.remove_logs(namespace, name, uid)
        self.cri.remove_logs(namespace, name, uid)

    def adopt(self, record: PodRecord, pids_in_cgroup: set[int]) -> list[str]:
        owner: Runtime = self.cri if self.cri.owns(record.uid) else self.process
        with self._lock:
            self._owner[record.uid] = owner
        return owner.adopt(record, pids_in_cgroup)

    def held_pods(self) -> set[str]:
        """Pods the CRI runtime holds a sandbox or container of (housekeeping removes those no one wants, as
        the kubelet's GC does); a process pod always has its cgroup, which housekeeping lists itself."""
        try:
            return self.cri.held_pods()
        except RuntimeError as exc:
            log.debug("no orphan search in the runtime this time: %s", exc)  # the pods' status says why
            return set()

    def has_exited(self, uid: str) -> bool:
        owner = self._of(uid)
        return owner.has_exited(uid) if owner is not None else False

    def running_pids(self, uid: str) -> set[int]:
        owner = self._of(uid)
        return (owner or self.process).running_pids(uid)

    def kill_pod(
        self,
        uid: str,
        record: PodRecord | None,
        target: PodKillTarget,
        grace: Callable[[], int],
        cancelled: threading.Event | None = None,
    ) -> None:
        owner = self._of(uid)
        if owner is None and self.cri.owns(uid):
            owner = self.cri  # an orphan a previous agent ran through CRI
        if owner is self.cri:
            self.cri.kill_pod(uid, record, target, grace, cancelled)
        else:
            self.process.kill_pod(uid, record, target, grace, cancelled)

    def exec_sync(self, uid: str, container: str, command: Sequence[str], timeout: float) -> Any:
        """Exec probes: ExecSync for CRI pods; the process runtime's own way (if it has one) for the rest."""
        if self._of(uid) is self.cri:
            return self.cri.exec_sync(uid, container, command, timeout)
        return self.process.exec_sync(uid, container, command, timeout)  # type: ignore[attr-defined]

    @property
    def security(self) -> SecurityPolicy:
        return self.process.security

    def kill_container(self, record: PodRecord, container: str, grace: int) -> None:
        """Stop one container (a failed liveness or startup probe) in the runtime that runs the pod."""
        (self._of(record.uid) or self.process).kill_container(record, container, grace)

    def cri_exec_runner(self, uid: str, container: str) -> ExecRunner | None:
        """Exec probes of a CRI pod go through ExecSync; None for a process pod (the prober's own way)."""
        if self._of(uid) is not self.cri:
            return None
        cri = self.cri

        def run(command: Sequence[str], timeout: float) -> ExecResult:
            try:
                code, out, err = cri.exec_sync(uid, container, command, timeout)
            except LookupError as exc:
                raise ProbeError(str(exc)) from None
            except RuntimeError as exc:
                if "DEADLINE_EXCEEDED" in str(exc) or "timeout" in str(exc):
                    return ExecResult(-1, b"", timed_out=True)
                raise ProbeError(str(exc)) from None
            return ExecResult(code, (out + err)[:MAX_OUTPUT_BYTES])

        return run

    def pod_usage(self, record: PodRecord, cgroup: CgroupReading) -> PodUsage:
        return (self._of(record.uid) or self.process).pod_usage(record, cgroup)

    def log_reopener(self, uid: str, container: str) -> Callable[[], None] | None:
        return (self._of(uid) or self.cri).log_reopener(uid, container)  # CRI's: None unless it runs it

    # ----- streams: a CRI pod's go through the runtime's streaming server, a process pod's are the agent's --

    def exec_url(self, uid: str, container: str, command: Sequence[str], flags: StreamFlags) -> str | None:
        return self.cri.exec_url(uid, container, command, flags) if self._of(uid) is self.cri else None

    def attach_url(self, uid: str, container: str, flags: StreamFlags) -> str | None:
        return self.cri.attach_url(uid, container, flags) if self._of(uid) is self.cri else None

    def port_forward_url(self, uid: str) -> str | None:
        return self.cri.port_forward_url(uid) if self._of(uid) is self.cri else None

    def forget(self, uid: str) -> None:
        self.process.forget(uid)
        self.cri.forget(uid)
        with self._lock:
            self._owner.pop(uid, None)
