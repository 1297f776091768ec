"""PodAmounts-level requests, limits and QoS class, computed as Kubernetes computes them.

Requests follow component-helpers' PodRequests: the steady state (app containers plus
sidecars) against the peak of any init container (plus the sidecars started before
it), whichever is larger per resource, then `spec.overhead` is added. Limits work the
same way, with overhead added only to limits that are set. The QoS class follows
pkg/apis/core/v1/helper/qos: only cpu and memory count, init containers included.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from kubenode.model.resources import CPU, MEMORY, ResourceList, add_into, max_into


class QOSClass(enum.StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


# What these helpers read of `objects.Container` and `objects.Pod`, named structurally so that this module
# sits below objects.py (whose Pod caches its requests, limits and QoS class from here) and imports nothing
# back from it.
class ContainerAmounts(Protocol):
    @property
    def requests(self) -> Mapping[str, int]: ...
    @property
    def limits(self) -> Mapping[str, int]: ...
    @property
    def is_sidecar(self) -> bool: ...


class PodAmounts(Protocol):
    @property
    def init_containers(self) -> Sequence[ContainerAmounts]: ...
    @property
    def containers(self) -> Sequence[ContainerAmounts]: ...
    @property
    def all_containers(self) -> Sequence[ContainerAmounts]: ...
    @property
    def overhead(self) -> Mapping[str, int]: ...


# kube-scheduler counts a container without a cpu/memory request as asking for these
# (schedutil.DefaultMilliCPURequest, DefaultMemoryRequest) when it spreads load.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def non_zero_requests(container: ContainerAmounts) -> Mapping[str, int]:
    """The container's requests with kube-scheduler's defaults for a missing cpu or memory
    request (PodResourcesOptions.NonMissingContainerRequests: an explicit 0 stays 0)."""
    requests = dict(container.requests)
    requests.setdefault(CPU, DEFAULT_MILLI_CPU_REQUEST)
    requests.setdefault(MEMORY, DEFAULT_MEMORY_REQUEST)
    return requests


def _aggregate(pod: PodAmounts, of: Callable[[ContainerAmounts], Mapping[str, int]]) -> ResourceList:
    steady: ResourceList = {}
    for container in pod.containers:
        add_into(steady, of(container))
    started_sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for init in pod.init_containers:
        if init.is_sidecar:
            add_into(steady, of(init))
            add_into(started_sidecars, of(init))
            while_running = dict(started_sidecars)
        else:
            while_running = add_into(dict(of(init)), started_sidecars)
        max_into(init_peak, while_running)
    return max_into(steady, init_peak)


def pod_requests(pod: PodAmounts, *, non_zero: bool = False) -> ResourceList:
    """Effective pod requests; with non_zero, unset cpu/memory requests count as kube-scheduler's defaults."""
    requests = _aggregate(pod, non_zero_requests if non_zero else (lambda c: c.requests))
    return add_into(requests, pod.overhead)


def pod_limits(pod: PodAmounts) -> ResourceList:
    limits = _aggregate(pod, lambda c: c.limits)
    for name, amount in pod.overhead.items():
        if limits.get(name):
            limits[name] += amount
    return limits


def qos_class(pod: PodAmounts) -> QOSClass:
    requests: ResourceList = {}
    limits: ResourceList = {}
    guaranteed = True
    for container in pod.all_containers:
        for name in (CPU, MEMORY):
            if container.requests.get(name, 0) > 0:
                requests[name] = requests.get(name, 0) + container.requests[name]
        found = set()
        for name in (CPU, MEMORY):
            if container.limits.get(name, 0) > 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + container.limits[name]
        if found != {CPU, MEMORY}:
            guaranteed = False
    if not requests and not limits:
        return QOSClass.BEST_EFFORT
    if guaranteed and requests == limits:
        return QOSClass.GUARANTEED
    return QOSClass.BURSTABLE
