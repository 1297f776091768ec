"""Logical CPUs with their SMT siblings and NUMA node, read from sysfs (a fake tree works too)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kubenode.cpuset import parse_cpuset


@dataclass(frozen=True)
class LogicalCpu:
    cpu: int
    siblings: frozenset[int]  # this CPU and its SMT siblings (thread_siblings_list)
    numa_node: int | None  # None: the machine reports no NUMA topology

    @property
    def core(self) -> int:
        """A physical core is named by its lowest-numbered thread."""
        return min(self.siblings)


def read_cpu_topology(sysfs_root: str | Path = "/sys") -> list[LogicalCpu]:
    cpu_dir = Path(sysfs_root, "devices/system/cpu")
    online_file = cpu_dir / "online"
    if online_file.exists():
        online = parse_cpuset(online_file.read_text())
    else:
        names = (re.fullmatch(r"cpu(\d+)", p.name) for p in cpu_dir.glob("cpu*"))
        online = frozenset(int(m.group(1)) for m in names if m)
    if not online:
        raise FileNotFoundError(f"no online CPUs found under {cpu_dir}")
    numa_of = _numa_of_cpus(Path(sysfs_root, "devices/system/node"))
    cpus = []
    for cpu in sorted(online):
        siblings_file = cpu_dir / f"cpu{cpu}/topology/thread_siblings_list"
        siblings = parse_cpuset(siblings_file.read_text()) if siblings_file.exists() else frozenset({cpu})
        cpus.append(LogicalCpu(cpu, (siblings & online) | {cpu}, numa_of.get(cpu)))
    return cpus


def _numa_of_cpus(node_dir: Path) -> dict[int, int]:
    numa_of: dict[int, int] = {}
    for path in node_dir.glob("node*"):
        match = re.fullmatch(r"node(\d+)", path.name)
        cpulist = path / "cpulist"
        if match and cpulist.exists():
            for cpu in parse_cpuset(cpulist.read_text()):
                numa_of[cpu] = int(match.group(1))
    return numa_of
