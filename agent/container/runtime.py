"""`PodRuntime`: what syncPod, the PLEG loop, termination and adoption ask of a runtime.

Both runtimes implement it: runtime.ProcessRuntime (host processes) and cri.runtime.CRIRuntime (containers
through CRI); selector.RuntimeSelector implements it over the two, choosing one per pod.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from agent.container.podrecord import PodRecord
from agent.container.resources import ContainerResources
from agent.container.security import SecurityPolicy
from agent.container.streaming import StreamFlags
from agent.container.usage import CgroupReading, PodUsage
from agent.container.volumes import MountedVolume
from agent.util.backoff import CrashLoopBackoff
from kubenode.model import Pod


class PodKillTarget(Protocol):
    """What kill_pod needs from the cgroup layer (PodCgroups satisfies it)."""

    def pids(self, uid: str) -> set[int]: ...

    def signal_all(self, uid: str, sig: int) -> int: ...


class PodRuntime(Protocol):
    @property
    def backoff(self) -> CrashLoopBackoff: ...

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
        """Start or restart what should run now; returns seconds until a backoff expires (a requeue hint).

        `fresh_cgroup`: the caller has just made the pod cgroup, so no process is in it yet."""

    def adopt(self, record: PodRecord, pids_in_cgroup: set[int]) -> list[str]:
        """On agent start: take over the pod's running containers; returns their names."""

    def has_exited(self, uid: str) -> bool:
        """Whether a container of the pod stopped since the last relist (the PLEG's question)."""

    def running_pids(self, uid: str) -> set[int]:
        """The pod's live container processes the agent itself signals (none for CRI pods)."""

    def kill_pod(
        self,
        uid: str,
        record: PodRecord | None,
        target: PodKillTarget,
        grace: Callable[[], int],
        cancelled: threading.Event | None = None,
    ) -> None:
        """Stop every container of the pod within the grace period; record the exits."""

    def pod_logs_dir(self, namespace: str, name: str, uid: str) -> Path:
        """Where the pod's container logs are (`<ns>_<name>_<uid>` under the runtime's log root)."""

    def remove_logs(self, namespace: str, name: str, uid: str) -> None:
        """Remove the pod's log directory (the pod is gone)."""

    @property
    def security(self) -> SecurityPolicy: ...

    def kill_container(self, record: PodRecord, container: str, grace: int) -> None:
        """Stop one container (a failed liveness or startup probe); its exit is recorded."""

    def forget(self, uid: str) -> None:
        """Drop what the runtime keeps about a pod that is gone."""

    # ----- stats and logs (agent/stats, agent/logs) ---------------------------------------------------

    def pod_usage(self, record: PodRecord, cgroup: CgroupReading) -> PodUsage:
        """The pod's and its running containers' usage (`cgroup` reads the pod cgroup); raises CgroupError,
        OSError or RuntimeError when it cannot be read."""

    def log_reopener(self, uid: str, container: str) -> Callable[[], None] | None:
        """How the runtime reopens the container's log after a rotation renamed it (CRI's
        ReopenContainerLog), or None when the log is rotated in place (agent/logs/rotation.py)."""

    # ----- streaming: kubectl exec, attach and port-forward (streaming.py) --------------------------

    def exec_url(self, uid: str, container: str, command: Sequence[str], flags: StreamFlags) -> str | None:
        """CRI Exec: the URL of the runtime's streaming server for this exec; None: the agent serves it
        itself. LookupError: the container is not running there; RuntimeError: the runtime refused or is
        gone."""

    def attach_url(self, uid: str, container: str, flags: StreamFlags) -> str | None:
        """CRI Attach, as exec_url."""

    def port_forward_url(self, uid: str) -> str | None:
        """CRI PortForward for the pod's sandbox, as exec_url."""
