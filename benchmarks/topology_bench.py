"""Topology Manager admission cost per pod: hints from two device resources, the policy's merge, and
the in-memory allocation with the merged affinity, on a fake machine of 2 and of 8 NUMA nodes.

Run: `.venv/bin/python benchmarks/topology_bench.py [--pods N]`. Each NUMA node has 16
kubenode.io/cpu and 2 kubenode.io/gpu devices; each pod's one container asks for 4 CPUs and 1 GPU.
Pods are admitted until the machine is full, then all are freed, round after round. The floor is
the none policy on the same machine (no hints, no merge: just the allocation), measured in the same
run; the figures are microseconds per admitted pod and the ratio to that floor. Merging is
exponential in the NUMA node count (every mask of every resource is a hint): that is why the
kubelet refuses more than 8 nodes without max-allowable-numa-nodes.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from benchstats import percentile, report

from agent.cm.topologymanager import DeviceHintSource, TopologyHint, new_manager
from agent.cm.topologymanager.devicehints import DeviceNUMA, container_device_requests
from kubenode.model import Container, Pod

CPU, GPU = "kubenode.io/cpu", "kubenode.io/gpu"
PER_NODE = {CPU: 16, GPU: 2}
ASK = {CPU: 4, GPU: 1}


@dataclass
class Machine:
    """Devices with their NUMA node and who holds them: the DeviceView and the allocating provider."""

    numa_nodes: int
    devices: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    held: dict[str, dict[str, dict[str, set[str]]]] = field(default_factory=dict)  # pod -> container -> res
    taken: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for resource, count in PER_NODE.items():
            self.devices[resource] = {
                f"{resource}-{n}-{i}": (n,) for n in range(self.numa_nodes) for i in range(count)
            }
            self.taken[resource] = set()
        self.source = DeviceHintSource(self, range(self.numa_nodes))

    # DeviceView
    def is_device_resource(self, resource: str) -> bool:
        return resource in self.devices

    def device_numa(self, resource: str) -> DeviceNUMA:
        return self.devices[resource]

    def free_devices(self, resource: str) -> Collection[str]:
        return [d for d in self.devices[resource] if d not in self.taken[resource]]

    def held_by_container(self, pod_uid: str, container: str, resource: str) -> Collection[str]:
        return self.held.get(pod_uid, {}).get(container, {}).get(resource, set())

    def held_by_pod(self, pod_uid: str, resource: str) -> Collection[str]:
        return {d for c in self.held.get(pod_uid, {}).values() for d in c.get(resource, ())}

    def reusable(self, pod_uid: str, resource: str) -> Collection[str]:
        return ()

    # HintProvider
    def get_topology_hints(self, pod: Pod, container: Container) -> object:
        return self.source.container_hints(pod, container)

    def get_pod_topology_hints(self, pod: Pod) -> object:
        return self.source.pod_hints(pod)

    def allocate(self, pod: Pod, container: Container, affinity: TopologyHint) -> None:
        for resource, count in container_device_requests(self, container).items():
            free = self.free_devices(resource)
            aligned = [
                d
                for d in free
                if affinity.affinity is None or affinity.affinity.any_set(self.devices[resource][d])
            ]
            chosen = (aligned + [d for d in free if d not in aligned])[:count]
            if len(chosen) < count:
                raise RuntimeError(f"not enough {resource}")
            self.taken[resource].update(chosen)
            self.held.setdefault(pod.uid, {}).setdefault(container.name, {})[resource] = set(chosen)

    def free_all(self) -> None:
        self.held.clear()
        for taken in self.taken.values():
            taken.clear()


def per_pod_us(policy: str, scope: str, numa_nodes: int, pods: int) -> list[float]:
    machine = Machine(numa_nodes)
    manager = new_manager(policy, scope, {}, nodes=range(numa_nodes))
    manager.add_hint_provider(machine)  # type: ignore[arg-type]
    fit = numa_nodes * PER_NODE[GPU] // ASK[GPU]
    samples = []
    for index in range(pods):
        if index % fit == 0:
            machine.free_all()
        pod = Pod(f"p{index}", uid=f"uid-{index}", containers=(Container("main", requests=ASK, limits=ASK),))
        started = time.perf_counter()
        result = manager.admit(pod)
        samples.append((time.perf_counter() - started) * 1e6)
        if not result.admit:
            raise SystemExit(
                f"{policy}/{scope} on {numa_nodes} NUMA nodes refused {pod.key}: {result.message}"
            )
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pods", type=int, default=400, help="pods per case on 2 NUMA nodes (8 nodes: a tenth)"
    )
    args = parser.parse_args()
    for numa_nodes in (2, 8):
        pods = args.pods if numa_nodes == 2 else max(8, args.pods // 10)
        floor = percentile(per_pod_us("none", "container", numa_nodes, pods), 50)
        report(f"admission, none (floor), {numa_nodes} NUMA nodes, p50", floor, "us/pod")
        for policy, scope in (
            ("single-numa-node", "container"),
            ("best-effort", "container"),
            ("restricted", "pod"),
        ):
            samples = per_pod_us(policy, scope, numa_nodes, pods)
            p50 = percentile(samples, 50)
            name = f"admission, {policy}/{scope}, {numa_nodes} NUMA nodes"
            report(f"{name}, p50", p50, "us/pod")
            report(f"{name}, p99", percentile(samples, 99), "us/pod")
            report(f"{name}, p50 / floor", p50 / floor, "x")


if __name__ == "__main__":
    main()
