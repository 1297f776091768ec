"""The kubelet's cgroup arithmetic (pkg/kubelet/cm/helpers_linux.go) and ResourceConfigForPod."""

from __future__ import annotations

from agent.cm.cgroups.api import ResourceConfig
from kubenode.model import Container, Pod, QOSClass
from kubenode.model.resources import CPU, MEMORY

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
QUOTA_PERIOD = 100000  # µs; the CPUCFSQuotaPeriod gate is off, so this is always the period
MIN_QUOTA_PERIOD = 1000  # µs; also the smallest quota the kernel takes
MAX_QUOTA_PERIOD = 1000000  # µs; the kernel refuses longer periods
MAX_WEIGHT = 10000
UNLIMITED = -1


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """MilliCPUToShares: 0 -> 2, else m*1024/1000 clamped to [2, 262144]."""
    if milli_cpu == 0:
        return MIN_SHARES
    shares = milli_cpu * SHARES_PER_CPU // MILLI_CPU_TO_CPU
    return max(MIN_SHARES, min(MAX_SHARES, shares))


def milli_cpu_to_quota(milli_cpu: int, period: int = QUOTA_PERIOD) -> int:
    """MilliCPUToQuota: 0 -> 0 (no quota), else m*period/1000 with a floor of 1000 µs."""
    if milli_cpu == 0:
        return 0
    return max(MIN_QUOTA_PERIOD, milli_cpu * period // MILLI_CPU_TO_CPU)


def shares_to_weight(shares: int) -> int:
    """The kubelet's linear shares -> cpu.weight conversion (2 -> 1, 1024 -> 39, 262144 -> 10000)."""
    if shares >= MAX_SHARES:
        return MAX_WEIGHT
    return 1 + (shares - MIN_SHARES) * (MAX_WEIGHT - 1) // (MAX_SHARES - MIN_SHARES)


def weight_to_shares(weight: int) -> int:
    """The kubelet's inverse of shares_to_weight (cpuWeightToCPUShares)."""
    return (weight - 1) * (MAX_SHARES - MIN_SHARES) // (MAX_WEIGHT - 1) + MIN_SHARES


def _limits_declared(pod: Pod, resource: str) -> bool:
    # ResourceConfigForPod's ContainerFn: one container (init included) without the limit
    # means the pod as a whole has none for that resource.
    return all(container.limits.get(resource, 0) > 0 for container in pod.all_containers)


def resource_config_for_pod(
    pod: Pod,
    *,
    enforce_cpu_limits: bool = True,
    pids_limit: int = UNLIMITED,
    cpuset: str | None = None,
) -> ResourceConfig:
    """ResourceConfigForPod (QoS decides which limits apply), plus the node-wide pids limit and cpuset.

    Guaranteed: shares, quota, period and memory. Burstable: shares always; quota/period only
    if every container has a cpu limit; memory only if every container has a memory limit.
    BestEffort: shares 2 only. With enforce_cpu_limits off (cpuCFSQuota=false) the quota is unlimited.
    """
    shares = milli_cpu_to_shares(pod.requests.get(CPU, 0))
    quota: int | None = milli_cpu_to_quota(pod.limits.get(CPU, 0))
    if not enforce_cpu_limits or quota == 0:
        quota = None
    memory: int | None = pod.limits.get(MEMORY, 0) or None
    pids = pids_limit if pids_limit > 0 else None
    qos = pod.qos_class
    if qos == QOSClass.BEST_EFFORT:
        return ResourceConfig(cpu_shares=MIN_SHARES, pids_limit=pids, cpuset_cpus=cpuset)
    if qos == QOSClass.BURSTABLE:
        if not _limits_declared(pod, CPU):
            quota = None
        if not _limits_declared(pod, MEMORY):
            memory = None
    # The period goes with the quota: the kubelet sets both or neither.
    period = QUOTA_PERIOD if (qos == QOSClass.GUARANTEED or _limits_declared(pod, CPU)) else None
    return ResourceConfig(
        cpu_shares=shares,
        cpu_quota=quota,
        cpu_period=period,
        memory_limit=memory,
        pids_limit=pids,
        cpuset_cpus=cpuset,
    )


def resource_config_for_container(
    container: Container,
    *,
    enforce_cpu_limits: bool = True,
    pids_limit: int = UNLIMITED,
    cpuset: str | None = None,
) -> ResourceConfig:
    """A container cgroup's config, as the kubelet's generateLinuxContainerResources hands it to runc: shares
    from the container's cpu request (its limit when it has no request, as the API server defaults it;
    2 with neither), quota and period from its cpu limit, its memory limit, the node-wide pids limit and
    the pod's cpuset. The pod cgroup above keeps the pod's totals."""
    milli_cpu = container.requests.get(CPU) or container.limits.get(CPU, 0)
    quota: int | None = milli_cpu_to_quota(container.limits.get(CPU, 0))
    if not enforce_cpu_limits or quota == 0:
        quota = None
    return ResourceConfig(
        cpu_shares=milli_cpu_to_shares(milli_cpu),
        cpu_quota=quota,
        cpu_period=QUOTA_PERIOD if quota is not None else None,
        memory_limit=container.limits.get(MEMORY, 0) or None,
        pids_limit=pids_limit if pids_limit > 0 else None,
        cpuset_cpus=cpuset,
    )
