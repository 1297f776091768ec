"""What the streaming routes reach in the agent's pods: resolved on an executor thread (the agent's lock),
each answering the target or (HTTP code, one line) for the route to refuse with.

    exec:        the running container -> its ExecSpec (env, workingDir, pod cgroup)
    attach:      the running container -> its log file, stdin FIFO, and whether it still runs
    portForward: the running pod -> the check of a port: declared (containerPort) or listened on by a
                 process in the pod cgroup
A CRI pod's answer is instead the runtime's streaming URL (the runtime's exec_url, attach_url,
port_forward_url: CRI Exec, Attach, PortForward), which the route proxies (streamproxy.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import psutil

from agent.container.downwardapi import ContainerConfigError
from agent.container.podrecord import RUNNING, ContainerRecord
from agent.container.podview import PodView
from agent.container.streaming import StreamFlags
from agent.kuberuntime.execstream import ExecSpec, exec_spec
from agent.kuberuntime.runtime import ProcessRuntime, wants_stdin
from agent.kuberuntime.securitycontext import raw_container
from agent.node import NodeAgent
from agent.server.attach import AttachTarget, ResolveAttach
from agent.server.portforward import PortCheck, ResolvePod
from agent.server.remotecommand import Resolve
from agent.server.streamproxy import Upstream
from kubenode.model import Pod

T = TypeVar("T")
Refusal = tuple[int, str]


@dataclass(frozen=True)
class Running:
    pod: Pod
    record: ContainerRecord


class PodTargets:
    def __init__(self, agent: NodeAgent) -> None:
        self._agent = agent

    @staticmethod
    async def _off_loop(call: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, call, *args)

    def _view(self, namespace: str, name: str) -> PodView | Refusal:
        for view in self._agent.views.pods():
            if view.pod is not None and view.pod.namespace == namespace and view.pod.name == name:
                return view
        return (
            404,
            f'pod "{name}" in namespace "{namespace}" not found on node {self._agent.config.node_name}',
        )

    def _running(self, namespace: str, name: str, container: str) -> Running | Refusal:
        view = self._view(namespace, name)
        if isinstance(view, tuple):
            return view
        assert view.pod is not None
        if not any(c.name == container for c in view.pod.all_containers):
            return 404, f'container "{container}" in pod "{name}" not found'
        record = view.record.containers.get(container)
        if record is None or record.state != RUNNING:
            state = record.reason or record.state if record is not None else "not started"
            return 400, f'container "{container}" in pod "{name}" is not running ({state})'
        return Running(view.pod, record)

    # ----- exec ------------------------------------------------------------------------------------

    @staticmethod
    def _streaming_url(what: str, ask: Callable[[], str | None]) -> Upstream | None:
        """The runtime's streaming URL (a CRI pod), None (a process pod: the agent serves it). The runtime's
        refusal is told the client after its upgrade (streamproxy.py): the API server cannot know it."""
        try:
            url = ask()
        except (LookupError, RuntimeError) as exc:
            return Upstream("", what, error=str(exc))
        return Upstream(url, what) if url is not None else None

    def _exec(
        self, namespace: str, name: str, container: str, command: list[str], flags: StreamFlags
    ) -> ExecSpec | Upstream | Refusal:
        found = self._running(namespace, name, container)
        if isinstance(found, tuple):
            return found
        pod = found.pod
        runtime = self._agent.runtime
        what = f"exec in container {container} of pod {name}"
        upstream = self._streaming_url(what, lambda: runtime.exec_url(pod.uid, container, command, flags))
        if upstream is not None:
            return upstream
        try:
            files = self._agent.cm.cgroups.container_procs_files(pod, container)
            policy = self._agent.runtime.security
            return exec_spec(pod, container, command, files, self._agent.host, policy, found.record.pid)
        except ContainerConfigError as exc:
            return 400, str(exc)

    @property
    def exec(self) -> Resolve:
        async def resolve(
            namespace: str, name: str, container: str, command: list[str], flags: StreamFlags
        ) -> ExecSpec | Upstream | Refusal:
            return await self._off_loop(self._exec, namespace, name, container, command, flags)

        return resolve

    # ----- attach ----------------------------------------------------------------------------------

    def _still_running(self, uid: str, container: str, log_path: str) -> bool:
        for view in self._agent.views.pods():
            if view.record.uid == uid:
                rec = view.record.containers.get(container)
                return rec is not None and rec.state == RUNNING and rec.log_path == log_path
        return False

    def _attach(
        self, namespace: str, name: str, container: str, flags: StreamFlags
    ) -> AttachTarget | Upstream | Refusal:
        found = self._running(namespace, name, container)
        if isinstance(found, tuple):
            return found
        pod = found.pod
        if flags.stdin and not wants_stdin(pod, container):
            return 400, f"attach: container {container} was not started with stdin: true"
        # The container's own tty, as the kubelet takes it: a process's terminal cannot change once started.
        flags = dataclasses.replace(flags, tty=raw_container(pod, container).get("tty") is True)
        runtime = self._agent.runtime
        what = f"attach to container {container} of pod {name}"
        upstream = self._streaming_url(what, lambda: runtime.attach_url(pod.uid, container, flags))
        if upstream is not None:
            return upstream
        uid, log_path = pod.uid, found.record.log_path
        # attach is served for process pods: their runtime keeps the stdin FIFO (with a CRI endpoint the
        # selector's process runtime; CRI pods' attach would go through the runtime's streaming server).
        process = cast(ProcessRuntime, getattr(self._agent.runtime, "process", self._agent.runtime))
        stdin = process.stdin_path(uid, container) if wants_stdin(pod, container) else None
        return AttachTarget(Path(log_path), stdin, lambda: self._still_running(uid, container, log_path))

    @property
    def attach(self) -> ResolveAttach:
        async def resolve(
            namespace: str, name: str, container: str, flags: StreamFlags
        ) -> AttachTarget | Upstream | Refusal:
            return await self._off_loop(self._attach, namespace, name, container, flags)

        return resolve

    # ----- port-forward ----------------------------------------------------------------------------

    def _refusal(self, name: str, uid: str, declared: set[int], port: int) -> str | None:
        if port in declared or port in listening_ports(self._agent.cm.cgroups.pids(uid)):
            return None
        return (
            f"error forwarding port {port} to pod {name}: the pod declares no such port"
            " and none of its processes listens on it"
        )

    def _forward(self, namespace: str, name: str) -> PortCheck | Upstream | Refusal:
        view = self._view(namespace, name)
        if isinstance(view, tuple):
            return view
        pod = view.pod
        assert pod is not None
        if view.record.phase != "Running":
            return 400, f'pod "{name}" is not running (phase {view.record.phase}): cannot forward ports'
        runtime = self._agent.runtime
        upstream = self._streaming_url(
            f"forward ports to pod {name}", lambda: runtime.port_forward_url(pod.uid)
        )
        if upstream is not None:
            return upstream
        uid, declared = pod.uid, declared_ports(pod.raw)

        async def check(port: int) -> str | None:
            return await self._off_loop(self._refusal, name, uid, declared, port)

        return check

    @property
    def port_forward(self) -> ResolvePod:
        async def resolve(namespace: str, name: str) -> PortCheck | Upstream | Refusal:
            return await self._off_loop(self._forward, namespace, name)

        return resolve


def declared_ports(raw: Any) -> set[int]:
    """containerPort of every container's `ports` in a pod document."""
    spec = raw.get("spec") or {} if isinstance(raw, dict) else {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    return {
        int(p["containerPort"])
        for c in containers
        for p in c.get("ports") or []
        if isinstance(p, dict) and str(p.get("containerPort", "")).isdigit()
    }


def listening_ports(pids: set[int]) -> set[int]:
    """The TCP ports the given processes listen on."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return set()
    return {c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN and c.pid in pids and c.laddr}
