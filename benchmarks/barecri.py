"""`BareCRI`: a minimal CRI client, the floor the agent's CRI pods are measured against (cri_bare_bench.py).

It makes only the three calls that start a pod, straight on the runtime.v1 stubs (kubenode/api/cri/v1):
RunPodSandbox -> CreateContainer -> StartContainer, with what the agent sends for the same BestEffort pod
(agent/kuberuntime/cri/configs.py, the kubelet's kuberuntime): the same image and command, the node's
network, the pod's IPC and a PID namespace per container, the pod log directory (made first, as the
kubelet does), and as cgroup_parent the agent's cgroupfs layout under a root of its own,
`<root>/kubepods/besteffort/pod<uid>` (runc makes the pod level, the tiers exist beforehand as on a node).
No relist, no image check, no record, no status: nothing but the runtime's own work and one round trip
per call. `remove_pod` stops and removes a sandbox (its container with it).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import grpc

from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.api.cri.v1 import api_pb2_grpc as cri_grpc

TIMEOUT_S = 60.0
BESTEFFORT_SHARES = 2  # the kubelet's MinShares: a container without a CPU request
BESTEFFORT_OOM_SCORE_ADJ = 1000  # the kubelet's BestEffort oom_score_adj
QUOTA_PERIOD_US = 100000
# The labels the kubelet puts on a pod; the node label is not the agent's, so it never adopts these pods.
NODE_LABEL = "kubenode.io/node"
BARE_NODE = "bare-cri-client"


def _namespaces() -> cri.NamespaceOption:
    return cri.NamespaceOption(network=cri.NODE, pid=cri.CONTAINER, ipc=cri.POD)


class BareCRI:
    def __init__(self, endpoint: str, cgroup_root: str, log_root: Path) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        self._runtime = cri_grpc.RuntimeServiceStub(self._channel)
        self.cgroup_root = "/" + cgroup_root.strip("/")
        self.log_root = log_root

    def close(self) -> None:
        self._channel.close()

    def start_pod(
        self, name: str, image: str, command: list[str], namespace: str = "default"
    ) -> tuple[str, float]:
        """Run one pod with one container `main`. Returns, once StartContainer has answered, the sandbox id
        and the time.monotonic() at which RunPodSandbox had answered."""
        uid = str(uuid.uuid4())
        labels = {
            "io.kubernetes.pod.name": name,
            "io.kubernetes.pod.namespace": namespace,
            "io.kubernetes.pod.uid": uid,
            NODE_LABEL: BARE_NODE,
        }
        log_directory = self.log_root / f"{namespace}_{name}_{uid}"
        (log_directory / "main").mkdir(parents=True)
        sandbox = cri.PodSandboxConfig(
            metadata=cri.PodSandboxMetadata(name=name, uid=uid, namespace=namespace, attempt=0),
            log_directory=str(log_directory),
            labels=labels,
            linux=cri.LinuxPodSandboxConfig(
                cgroup_parent=f"{self.cgroup_root}/kubepods/besteffort/pod{uid}",
                security_context=cri.LinuxSandboxSecurityContext(namespace_options=_namespaces()),
            ),
        )
        sandbox_id = self._runtime.RunPodSandbox(
            cri.RunPodSandboxRequest(config=sandbox), timeout=TIMEOUT_S
        ).pod_sandbox_id
        sandbox_ready = time.monotonic()
        container = cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name="main", attempt=0),
            image=cri.ImageSpec(image=image),
            command=command,
            log_path="main/0.log",
            labels={**labels, "io.kubernetes.container.name": "main"},
            linux=cri.LinuxContainerConfig(
                resources=cri.LinuxContainerResources(
                    cpu_shares=BESTEFFORT_SHARES,
                    cpu_period=QUOTA_PERIOD_US,
                    oom_score_adj=BESTEFFORT_OOM_SCORE_ADJ,
                ),
                security_context=cri.LinuxContainerSecurityContext(namespace_options=_namespaces()),
            ),
        )
        container_id = self._runtime.CreateContainer(
            cri.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=container, sandbox_config=sandbox),
            timeout=TIMEOUT_S,
        ).container_id
        self._runtime.StartContainer(cri.StartContainerRequest(container_id=container_id), timeout=TIMEOUT_S)
        return str(sandbox_id), sandbox_ready

    def remove_pod(self, sandbox_id: str) -> None:
        self._runtime.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=TIMEOUT_S)
        self._runtime.RemovePodSandbox(
            cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=TIMEOUT_S
        )

    def sandboxes(self, node: str) -> int:
        """How many sandboxes the runtime holds for `node`'s label (the agent's or this client's)."""
        listed = self._runtime.ListPodSandbox(
            cri.ListPodSandboxRequest(filter=cri.PodSandboxFilter(label_selector={NODE_LABEL: node})),
            timeout=TIMEOUT_S,
        )
        return len(listed.items)
