"""The pod cgroup API the agent's pod lifecycle codes against (see package docstring).

`PodCgroups` is a Protocol so the lifecycle's tests can use an in-memory double; the
real implementation comes from `make_pod_cgroups` (manager.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from kubenode.model import Container, Pod, QOSClass

if TYPE_CHECKING:
    from agent.cm.devicecgroup.rules import DeviceRule

Driver = Literal["cgroupfs", "systemd"]


class CgroupError(Exception):
    """A cgroup operation failed or a value was refused; the message names the cgroup and the file."""

    def __init__(self, cgroup: str, file: str, problem: str) -> None:
        self.cgroup = cgroup
        self.file = file
        self.problem = problem
        where = f"{cgroup}/{file}" if file else cgroup
        super().__init__(f"cgroup {where}: {problem}")


@dataclass(frozen=True)
class ResourceConfig:
    """What the kubelet's ResourceConfigForPod computes, plus the pod's cpuset."""

    cpu_shares: int | None = None  # v1 shares; v2 weight is derived with the kubelet's linear formula
    cpu_quota: int | None = None  # microseconds; None or -1 = unlimited
    cpu_period: int | None = None  # microseconds (100000)
    memory_limit: int | None = None  # bytes; None = unlimited
    pids_limit: int | None = None  # None or -1 = unlimited (node-wide setting)
    cpuset_cpus: str | None = None  # kernel list format "2-3,6"; None = copy the parent's
    cpuset_mems: str | None = None


@dataclass(frozen=True)
class PodCgroupInfo:
    uid: str
    qos: QOSClass
    name: str  # driver-specific cgroup path, e.g. /kubepods/burstable/pod<uid>
    # Made by this `ensure` where none of it existed: no process can be in it yet, so a sync that just
    # made it need not read its cgroup.procs files (a new pod's sync skips that reconcile). Not part of
    # the cgroup's identity: an info from `ensure` equals the one `list_pods` gives for the same cgroup.
    created: bool = field(default=False, compare=False)


class PodCgroups(Protocol):
    def start(self, node_allocatable: Mapping[str, int]) -> None:
        """Ensure the kubepods root and the burstable and besteffort tiers."""

    def update_qos_cgroups(self, active_pods: Iterable[Pod]) -> None:
        """Burstable shares = MilliCPUToShares(sum of active Burstable pods' cpu requests); besteffort 2."""

    def resource_config(self, pod: Pod, cpuset: str | None) -> ResourceConfig: ...

    def name_for(self, pod: Pod) -> str: ...

    def exists(self, pod: Pod) -> bool: ...

    def ensure(self, pod: Pod, cpuset: str | None = None) -> PodCgroupInfo:
        """Create the pod cgroup if missing and write its (validated) limits; repair drift if it exists."""

    def procs_files(self, pod: Pod) -> list[str]:
        """Absolute paths of cgroup.procs in every hierarchy of the pod cgroup."""

    def ensure_container(
        self, pod: Pod, container: Container, cpuset: str | None, device_rules: Sequence[DeviceRule]
    ) -> list[str]:
        """Make the container's own cgroup below the pod cgroup (its CPU, memory, pids and cpuset) and
        enforce its device rules; returns the cgroup.procs files its process joins before it execs."""

    def container_procs_files(self, pod: Pod, container: str) -> list[str]:
        """The cgroup.procs files a command exec'd in the container joins (its cgroup's, devices included)."""

    def container_oom_kills(self, uid: str, container: str) -> int:
        """The container cgroup's OOM kill count (0 while it has none)."""

    def describe_container(self, uid: str, container: str) -> dict[str, object]:
        """The container cgroup's name, limits and device rules (`kubenode trace pod`)."""

    def pids(self, uid: str) -> set[int]:
        """Every pid in the pod cgroup and its sub-cgroups, all hierarchies."""

    def signal_all(self, uid: str, sig: int) -> int:
        """Send sig to every pid in the pod cgroup; returns how many were signalled."""

    def destroy(self, uid: str) -> None:
        """SIGKILL leftovers (up to 5 passes), then remove the cgroup in every hierarchy; idempotent."""

    def list_pods(self) -> dict[str, PodCgroupInfo]:
        """Existing pod cgroups by UID (restart adoption, orphan cleanup)."""

    def read_limits(self, uid: str) -> dict[str, str]:
        """For status: cpu quota/period, shares or weight, memory, pids, cpuset."""

    def cpu_usage_ns(self, uid: str) -> int: ...

    def memory_working_set(self, uid: str) -> int:
        """The pod cgroup's memory usage less its inactive file pages (the kubelet's working set)."""

    def pods_memory_working_set(self) -> int:
        """The kubepods cgroup's working set, every pod's at once: what the kubelet's
        allocatableMemory.available subtracts from the allocatable memory."""

    def oom_kills(self, uid: str) -> int:
        """How many processes of the pod cgroup the kernel's OOM killer has killed (its lifetime count)."""

    def stop_and_remove_root(self) -> None:
        """Remove the empty tiers and the root (tests, `kubenode up` exit)."""
