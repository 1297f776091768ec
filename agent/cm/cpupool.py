"""Exclusive CPUs and the shared pool, as the kubelet's static CPU manager keeps them.

A pod that got CPU devices (kubenode.io/cpu, through KUBENODE_CPUSET) owns those CPUs. Every
other pod runs on the shared pool: the node's CPUs minus every exclusive set, so nobody
else is scheduled on a core that was handed out whole. The kubelet guarantees a non-empty
pool with reserved CPUs; kubenode's device plugin may advertise every CPU, so when nothing
is left the shared pods keep all CPUs (and a warning says so) rather than an empty cpuset.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable

from kubenode.cpuset import format_cpuset

log = logging.getLogger(__name__)


class CPUPool:
    def __init__(self, node_cpus: Iterable[int] | None = None) -> None:
        self._node = frozenset(node_cpus if node_cpus is not None else os.sched_getaffinity(0))
        self._exclusive: dict[str, frozenset[int]] = {}
        self._lock = threading.Lock()

    def assign(self, uid: str, cpus: Iterable[int]) -> bool:
        """Record the pod's exclusive CPUs; True if the shared pool changed."""
        new = frozenset(cpus)
        with self._lock:
            if self._exclusive.get(uid) == new:
                return False
            self._exclusive[uid] = new
            return True

    def release(self, uid: str) -> bool:
        """Forget the pod's exclusive CPUs; True if the shared pool changed."""
        with self._lock:
            return self._exclusive.pop(uid, None) is not None

    def exclusive(self, uid: str) -> frozenset[int]:
        """The pod's exclusive CPUs (empty when it runs on the shared pool)."""
        with self._lock:
            return self._exclusive.get(uid, frozenset())

    def shared(self) -> str | None:
        """The shared pool in kernel list format, or None (use the parent's CPUs) when it is empty."""
        with self._lock:
            taken = frozenset().union(*self._exclusive.values())
        left = self._node - taken
        if not left:
            log.warning("every CPU is allocated exclusively; pods without CPU devices share all of them")
            return None
        return format_cpuset(left)
