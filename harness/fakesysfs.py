"""A fake sysfs tree of logical CPUs (online list, SMT siblings, sockets, NUMA nodes) for the CPU code that
reads `/sys` (deviceplugin's topology, kubenode's DRA driver), shared by the tests, the harness's kill
cycles and the benchmarks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_fake_cpus(
    root: Path, siblings: Mapping[int, str], numa: Mapping[int, str] | None = None, cpus_per_socket: int = 0
) -> Path:
    """`root`/devices/system/... with each CPU's `thread_siblings_list`, its socket (`cpus_per_socket`
    CPUs each; 0: all on socket 0) and the NUMA nodes' `cpulist`s; returns `root`."""
    cpu_dir = root / "devices/system/cpu"
    for cpu, sibling_list in siblings.items():
        (cpu_dir / f"cpu{cpu}/topology").mkdir(parents=True, exist_ok=True)
        (cpu_dir / f"cpu{cpu}/topology/thread_siblings_list").write_text(sibling_list + "\n")
        socket = cpu // cpus_per_socket if cpus_per_socket else 0
        (cpu_dir / f"cpu{cpu}/topology/physical_package_id").write_text(f"{socket}\n")
    (cpu_dir / "online").write_text(f"0-{max(siblings)}\n")
    for node, cpulist in (numa or {}).items():
        (root / f"devices/system/node/node{node}").mkdir(parents=True, exist_ok=True)
        (root / f"devices/system/node/node{node}/cpulist").write_text(cpulist + "\n")
    return root
