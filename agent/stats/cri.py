"""A CRI pod's usage from its runtime, as the kubelet's CRI stats provider (cri_stats_provider.go) reads it.

Flow of `CRIStats.pod_usage` for one pod:
- ListPodSandboxStats: the sandbox's numbers (the pod cgroup, which the sandbox names as its cgroup_parent:
  CPU, working set, process count) and each of its containers' (the kubelet's PodAndContainerStatsFromCRI
  path). One call for the node's sandboxes (by the agent's node label) serves every pod for a second, so
  a scrape asks once, as the kubelet does; a pod new since then is asked for alone, by its
  `io.kubernetes.pod.uid` label. containerd 1.6 implements it
  (checked with 1.6.20: it answers UNKNOWN "cgroupPath is empty" only for a sandbox without a cgroup
  parent, which the agent never makes);
- where the runtime answers UNIMPLEMENTED (it is remembered) or fails for the sandbox, the kubelet's default
  path instead: the pod cgroup read by the agent (what cadvisor gives the kubelet) for the pod, and
  ListContainerStats for the containers.
A container counts only as the copy the CRI runtime tracks (`ids`, by name), never a dead one beside it.
Times are the runtime's own sample times; the rate (usageNanoCores) is the caller's, from the previous
reading of the same container ID (agent/server/stats.py), as the kubelet keeps its cpuUsageCache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import grpc

from agent.container.podrecord import PodRecord
from agent.container.usage import CgroupReading, PodUsage, Usage, running_names
from agent.kuberuntime.cri import labels
from agent.kuberuntime.cri.client import CRIError
from kubenode.api.cri.v1 import api_pb2 as cri

log = logging.getLogger(__name__)

Call = Callable[[str, Any], Any]
NODE_LIST_S = 1.0  # how long one node-wide ListPodSandboxStats answers for every pod (one scrape)


def _usage(cpu: Any, memory: Any, processes: int = 0) -> Usage:
    """A Usage from CRI's CpuUsage and MemoryUsage (sampled at the CPU reading's time)."""
    return Usage(
        int(cpu.usage_core_nano_seconds.value),
        int(memory.working_set_bytes.value),
        processes,
        cpu.timestamp / 1e9 if cpu.timestamp else time.time(),  # a runtime that gives no time: now
    )


def _containers(found: Iterable[Any], ids: Mapping[str, str]) -> dict[str, Usage]:
    """The tracked containers' usage by name, from CRI ContainerStats."""
    by_id = {stats.attributes.id: stats for stats in found}
    out = {}
    for name, cid in ids.items():
        stats = by_id.get(cid)
        if stats is not None and stats.HasField("cpu"):
            out[name] = _usage(stats.cpu, stats.memory)
    return out


class CRIStats:
    def __init__(self, call: Call, node: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._call = call
        self._node = node
        self._clock = clock
        self.sandbox_stats = True  # until the runtime answers UNIMPLEMENTED
        self._lock = threading.Lock()
        self._listed: dict[str, Any] = {}
        self._listed_at = -NODE_LIST_S - 1

    def pod_usage(self, record: PodRecord, ids: Mapping[str, str], cgroup: CgroupReading) -> PodUsage:
        """The pod's and its tracked running containers' usage; CRIError when the runtime fails."""
        running = set(running_names(record))
        ids = {name: cid for name, cid in ids.items() if name in running}
        if self.sandbox_stats:
            found = self._sandbox(record.uid)
            if found is not None:
                linux = found.linux
                pod = _usage(linux.cpu, linux.memory, int(linux.process.process_count.value))
                return PodUsage(pod, _containers(linux.containers, ids), ids)
        selector = {labels.POD_UID: record.uid, labels.NODE: self._node}
        listed = self._call(
            "ListContainerStats",
            cri.ListContainerStatsRequest(filter=cri.ContainerStatsFilter(label_selector=selector)),
        )
        pod, _ = cgroup()
        return PodUsage(pod, _containers(listed.stats, ids), ids)

    def _sandbox(self, uid: str) -> Any | None:
        """The pod's sandbox stats: from the node's list (one call a second serves a whole scrape), else
        asked for the pod alone (new since the list, or the list failed); None: the other path."""
        with self._lock:
            now = self._clock()
            if now - self._listed_at > NODE_LIST_S:
                self._listed = self._list({labels.NODE: self._node}) or {}
                self._listed_at = now
            found = self._listed.get(uid)
        if found is None and self.sandbox_stats:
            found = (self._list({labels.POD_UID: uid, labels.NODE: self._node}) or {}).get(uid)
        return found

    def _list(self, selector: Mapping[str, str]) -> dict[str, Any] | None:
        """ListPodSandboxStats: each pod's readable sandbox stats by UID; None when the runtime fails."""
        try:
            answer = self._call(
                "ListPodSandboxStats",
                cri.ListPodSandboxStatsRequest(filter=cri.PodSandboxStatsFilter(label_selector=selector)),
            )
        except CRIError as exc:
            if exc.code == grpc.StatusCode.UNIMPLEMENTED:
                log.info("the runtime has no ListPodSandboxStats: pods' usage from their cgroups")
                self.sandbox_stats = False
                return None
            if exc.unavailable:
                raise
            return None  # a sandbox cannot be read (gone meanwhile): the pods are asked for one by one
        by_uid: dict[str, Any] = {}
        for stats in answer.stats:
            if not (stats.HasField("linux") and stats.linux.HasField("cpu")):
                continue
            uid = stats.attributes.labels.get(labels.POD_UID, "")
            kept = by_uid.get(uid)
            if kept is None or len(stats.linux.containers) > len(kept.linux.containers):
                by_uid[uid] = stats  # the sandbox with the containers, not a stopped one beside it
        return by_uid
