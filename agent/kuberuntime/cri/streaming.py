"""`CRIStreaming`: the CRI calls behind kubectl exec, attach and port-forward (mixed into CRIRuntime).

    exec_url / attach_url: the pod's running container (ListContainers by its labels) -> CRI Exec or Attach
    with the client's streams -> the one-time URL on the runtime's streaming server.
    port_forward_url: the pod's ready sandbox -> CRI PortForward -> its URL.

The agent then proxies the client's stream to that URL (agent/server/streamproxy.py), as the kubelet's server
does. Attach's `tty` is the container's own (`tty: true` in its spec, set at CreateContainer), as the kubelet
takes it: a process's terminal cannot change after it started. Errors: LookupError when the pod has no such
running container or sandbox, RuntimeError naming the endpoint when the runtime refuses or is gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent.container.streaming import StreamFlags
from agent.kuberuntime.cri.client import CRIError
from kubenode.api.cri.v1 import api_pb2 as cri


class CRIStreaming:
    if TYPE_CHECKING:  # CRIRuntime's own (cri/runtime.py)

        def _call(self, method: str, request: Any, timeout: float | None = None) -> Any: ...
        def _containers(self, uid: str, name: str | None = None) -> list[cri.Container]: ...
        def _sandboxes(self, uid: str) -> list[cri.PodSandbox]: ...
        def _failed(self, exc: CRIError) -> RuntimeError: ...

    def _running_id(self, uid: str, container: str) -> str:
        found = [c.id for c in self._containers(uid, container) if c.state == cri.CONTAINER_RUNNING]
        if not found:
            raise LookupError(f"container {container} of pod {uid} is not running in the container runtime")
        return found[0]

    def exec_url(self, uid: str, container: str, command: Sequence[str], flags: StreamFlags) -> str | None:
        try:
            request = cri.ExecRequest(
                container_id=self._running_id(uid, container),
                cmd=list(command),
                tty=flags.tty,
                stdin=flags.stdin,
                stdout=flags.stdout,
                stderr=flags.stderr and not flags.tty,
            )
            return str(self._call("Exec", request).url)
        except CRIError as exc:
            raise self._failed(exc) from None

    def attach_url(self, uid: str, container: str, flags: StreamFlags) -> str | None:
        try:
            request = cri.AttachRequest(
                container_id=self._running_id(uid, container),
                stdin=flags.stdin,
                tty=flags.tty,
                stdout=flags.stdout,
                stderr=flags.stderr and not flags.tty,
            )
            return str(self._call("Attach", request).url)
        except CRIError as exc:
            raise self._failed(exc) from None

    def port_forward_url(self, uid: str) -> str | None:
        try:
            ready = [s.id for s in self._sandboxes(uid) if s.state == cri.SANDBOX_READY]
            if not ready:
                raise LookupError(f"pod {uid} has no ready sandbox in the container runtime")
            return str(self._call("PortForward", cri.PortForwardRequest(pod_sandbox_id=ready[0])).url)
        except CRIError as exc:
            raise self._failed(exc) from None
