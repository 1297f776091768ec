"""PodSandboxConfig and ContainerConfig as the kubelet builds them (kuberuntime_sandbox.go, _container.go,
_container_linux.go), for a node without CNI: every pod shares the node's network namespace.

Flow: `sandbox_config(pod, ...)` -> metadata (name, uid, namespace, attempt), the pod's log directory
(`<root>/<ns>_<name>_<uid>`), labels and annotations, the pod cgroup as `cgroup_parent`, host network
(and no hostname, which runc refuses without a UTS namespace of its own). `container_config(...)` -> command
and args ($(VAR) expanded), env, working dir, the log path `<container>/<restart>.log`, the device plugins'
devices and mounts, and the resources: CPU shares from the request, CFS quota from the limit, memory limit,
the exclusive cpuset, and the QoS class's oom_score_adj. Where the agent resolved the container's CDI names
(agent/cm/cdidevices.py), their device nodes join the plugins' devices (one at the same container path
replacing the plugin's, as CDI's injection does); otherwise the names go as CDI_devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

from agent.cm.cgroups.formulas import QUOTA_PERIOD, milli_cpu_to_quota, milli_cpu_to_shares
from agent.container.downwardapi import expand
from agent.container.resources import NO_RESOURCES, ContainerResources
from agent.kuberuntime.cri import labels
from agent.kuberuntime.securitycontext import raw_container
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.model import Container, Pod

NAME_MAX = 255
GUARANTEED_OOM_SCORE_ADJ = -997
BESTEFFORT_OOM_SCORE_ADJ = 1000
# Set by the agent in the process env; a CRI container gets its environment from the image and the spec.
PROCESS_ONLY_ENV = ("PATH", "HOSTNAME")


def pod_log_directory(root: Path, namespace: str, name: str, uid: str) -> Path:
    """`<ns>_<name>_<uid>` as the kubelet names pod log dirs; just the UID where that is too long."""
    directory = f"{namespace}_{name}_{uid}"
    if len(directory.encode()) > NAME_MAX:
        directory = uid
    return root / directory


def host_namespaces() -> cri.NamespaceOption:
    # No CNI: the node's network; the pod's own IPC and a PID namespace per container (the kubelet's default).
    return cri.NamespaceOption(network=cri.NODE, pid=cri.CONTAINER, ipc=cri.POD)


def sandbox_config(
    pod: Pod, node: str, log_root: Path, cgroup_parent: str, attempt: int
) -> cri.PodSandboxConfig:
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=pod.name, uid=pod.uid, namespace=pod.namespace, attempt=attempt),
        log_directory=str(pod_log_directory(log_root, pod.namespace, pod.name, pod.uid)),
        labels=labels.sandbox_labels(pod, node),
        annotations=labels.sandbox_annotations(pod),
        linux=cri.LinuxPodSandboxConfig(
            cgroup_parent=cgroup_parent,
            security_context=cri.LinuxSandboxSecurityContext(namespace_options=host_namespaces()),
        ),
    )


def oom_score_adj(pod: Pod, c: Container, memory_capacity: int) -> int:
    """The kubelet's GetContainerOOMScoreAdjust (pkg/kubelet/qos/policy.go)."""
    qos = pod.qos_class.value
    if qos == "Guaranteed":
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == "BestEffort":
        return BESTEFFORT_OOM_SCORE_ADJ
    request = c.requests.get("memory", 0)
    score = 1000 - (1000 * request) // max(1, memory_capacity)
    if score < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if score == BESTEFFORT_OOM_SCORE_ADJ:
        return score - 1
    return score


def container_resources(pod: Pod, c: Container, cpuset: str) -> cri.LinuxContainerResources:
    """Shares from the CPU request (2 without one), a CFS quota only under a CPU limit, the memory limit."""
    cpu_limit = c.limits.get("cpu", 0)
    resources = cri.LinuxContainerResources(
        cpu_shares=milli_cpu_to_shares(c.requests.get("cpu", 0)),
        cpu_period=QUOTA_PERIOD,
        cpu_quota=milli_cpu_to_quota(cpu_limit) if cpu_limit > 0 else 0,
        memory_limit_in_bytes=c.limits.get("memory", 0),
        oom_score_adj=oom_score_adj(pod, c, psutil.virtual_memory().total),
        cpuset_cpus=cpuset,
    )
    return resources


def container_devices(resources: ContainerResources) -> list[cri.Device]:
    """The plugins' device specs, then the resolved CDI device nodes, by container path."""
    devices = {
        d.container_path: cri.Device(
            host_path=d.host_path, container_path=d.container_path, permissions=d.permissions
        )
        for d in resources.devices
    }
    for node in resources.cdi_edits.device_nodes if resources.cdi_edits is not None else ():
        devices.pop(node.path, None)  # replaced, and last, as the CDI library's Apply orders them
        devices[node.path] = cri.Device(
            host_path=node.source, container_path=node.path, permissions=node.cgroup_access
        )
    return list(devices.values())


def container_config(
    pod: Pod,
    c: Container,
    *,
    env: Mapping[str, str],
    restart_count: int,
    node: str,
    resources: ContainerResources = NO_RESOURCES,
    security: cri.LinuxContainerSecurityContext | None = None,
    volume_mounts: Sequence[cri.Mount] = (),
) -> cri.ContainerConfig:
    run_env = {k: v for k, v in env.items() if k not in PROCESS_ONLY_ENV or any(e.name == k for e in c.env)}
    context = security if security is not None else cri.LinuxContainerSecurityContext()
    context.namespace_options.CopyFrom(host_namespaces())
    raw = raw_container(pod, c.name)
    return cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name=c.name, attempt=restart_count),
        image=cri.ImageSpec(image=c.image),
        command=[expand(part, env) for part in c.command],
        args=[expand(part, env) for part in c.args],
        working_dir=c.working_dir,
        stdin=raw.get("stdin") is True,  # kubectl attach -i reaches it (cri/streaming.py)
        stdin_once=raw.get("stdinOnce") is True,
        tty=raw.get("tty") is True,
        envs=[cri.KeyValue(key=k, value=v.encode()) for k, v in run_env.items()],
        log_path=f"{c.name}/{restart_count}.log",
        labels=labels.container_labels(pod, c, node),
        # The device plugins' annotations first, the kubelet's own over them (newContainerAnnotations).
        annotations={
            **resources.annotations,
            **labels.container_annotations(pod, c, restart_count, raw_container(pod, c.name)),
        },
        devices=container_devices(resources),
        mounts=[
            *volume_mounts,
            *(
                cri.Mount(host_path=m.host_path, container_path=m.container_path, readonly=m.read_only)
                for m in resources.mounts
            ),
        ],
        CDI_devices=[cri.CDIDevice(name=name) for name in resources.cdi_devices],
        linux=cri.LinuxContainerConfig(
            resources=container_resources(pod, c, resources.cpuset), security_context=context
        ),
    )
