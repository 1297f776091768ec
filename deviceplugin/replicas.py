"""Time-sliced sharing: advertise each device of a backend as N replicas `<id>::<n>`.

Replicas share the device's health and topology. Allocate maps replicas back to
their devices (two replicas of one device give that device once). Preferred
allocation spreads over devices, least-used first, like NVIDIA's "distributed" policy.

With `one_per_request` (MPS sharing) an Allocate of more than one replica is refused, as NVIDIA's plugin
refuses it for MPS whatever its failRequestsGreaterThanOne says (internal/rm ValidateRequest): a container
talks to one MPS control daemon through one CUDA_MPS_PIPE_DIRECTORY, so two replicas (of one GPU or of two)
cannot both be served. The kubelet fails the pod with UnexpectedAdmissionError and this one line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from deviceplugin.backend import Backend, ContainerAllocation, Device, OnChange
from deviceplugin.devicestate import RequestError
from deviceplugin.packing import natural_key

SEPARATOR = "::"


def device_of(replica_id: str) -> str:
    return replica_id.rsplit(SEPARATOR, 1)[0]


class ReplicatedBackend(Backend):
    def __init__(self, inner: Backend, replicas: int, one_per_request: bool = False) -> None:
        self.inner = inner
        self.replicas = replicas
        self.one_per_request = one_per_request

    def start(self, on_change: OnChange) -> None:
        self.inner.start(on_change)

    def stop(self) -> None:
        self.inner.stop()

    def devices(self) -> list[Device]:
        return [
            Device(f"{d.id}{SEPARATOR}{n}", d.healthy, d.numa_nodes)
            for d in self.inner.devices()
            for n in range(self.replicas)
        ]

    def allocate(self, ids: Sequence[str]) -> ContainerAllocation:
        if self.one_per_request and len(ids) > 1:
            raise RequestError(
                f"Allocate: {len(ids)} replicas requested; with MPS sharing the maximum request size for "
                "shared resources is 1"
            )
        return self.inner.allocate(list(dict.fromkeys(device_of(i) for i in ids)))

    def preferred(self, available: Sequence[Device], must_include: Sequence[str], size: int) -> list[str]:
        chosen = list(dict.fromkeys(must_include))
        free: dict[str, list[str]] = {}
        for device in sorted(available, key=lambda d: natural_key(d.id)):
            if device.id not in chosen:
                free.setdefault(device_of(device.id), []).append(device.id)
        used = Counter(device_of(i) for i in chosen)
        while len(chosen) < size and free:
            # The device with the most free replicas is the least shared; fewer picks so far breaks ties.
            parent = min(free, key=lambda p: (-len(free[p]), used[p], natural_key(p)))
            chosen.append(free[parent].pop(0))
            used[parent] += 1
            if not free[parent]:
                del free[parent]
        return chosen
