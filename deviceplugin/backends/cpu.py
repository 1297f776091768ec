"""CPUs as devices: one per logical CPU ("cpu<N>") or per physical core with its siblings ("core<N>").

Allocate answers the cpuset (KUBENODE_CPUSET env and the kubenode.io/cpuset
annotation) so the node agent can pin the pod's cgroup. Preferred allocation
packs into one NUMA node and keeps SMT siblings together.
"""

from __future__ import annotations

from collections.abc import Sequence

from deviceplugin.backend import Backend, ContainerAllocation, Device
from deviceplugin.backends.cputopology import LogicalCpu, read_cpu_topology
from deviceplugin.config import CpuOptions
from deviceplugin.cpuset import format_cpuset
from deviceplugin.packing import pack

CPUSET_ENV = "KUBENODE_CPUSET"
CPUSET_ANNOTATION = "kubenode.io/cpuset"


class CpuBackend(Backend):
    def __init__(self, options: CpuOptions) -> None:
        self.topology = read_cpu_topology(options.sysfs_root)
        self._cpus_of: dict[str, frozenset[int]] = {}
        self._core_of: dict[str, int] = {}
        self._devices: list[Device] = []
        for cpu in self.topology:
            if options.unit == "thread":
                self._add(f"cpu{cpu.cpu}", frozenset({cpu.cpu}), cpu, options.reserved)
            elif cpu.cpu == cpu.core:
                self._add(f"core{cpu.core}", cpu.siblings, cpu, options.reserved)

    def _add(self, device_id: str, cpus: frozenset[int], cpu: LogicalCpu, reserved: frozenset[int]) -> None:
        if cpus & reserved:
            return
        self._cpus_of[device_id] = cpus
        self._core_of[device_id] = cpu.core
        numa = () if cpu.numa_node is None else (cpu.numa_node,)
        self._devices.append(Device(device_id, True, numa))

    def cpus_of(self, device_id: str) -> frozenset[int]:
        return self._cpus_of[device_id]

    def devices(self) -> list[Device]:
        return list(self._devices)

    def allocate(self, ids: Sequence[str]) -> ContainerAllocation:
        cpuset = format_cpuset(cpu for device_id in ids for cpu in self._cpus_of[device_id])
        return ContainerAllocation(envs={CPUSET_ENV: cpuset}, annotations={CPUSET_ANNOTATION: cpuset})

    def preferred(self, available: Sequence[Device], must_include: Sequence[str], size: int) -> list[str]:
        return pack(available, must_include, size, group_of=self._core_of.__getitem__)
