"""Housekeeping (the kubelet's HandlePodCleanups): what no one wants any more is stopped and removed.

Flow of a round (every `housekeeping_interval`, and at once while a pod is held): the pod cgroups, the pod
volume directories and (with a CRI runtime) the pods the runtime holds are listed first; the pod workers
learn which pods are admitted; held pods whose full name is free are added; an admitted pod without a worker
gets one; then every record, cgroup or runtime pod that neither a source nor a worker knows is an orphan:
its containers killed (1 s grace), its cgroup, volumes, devices, record and logs removed. ConfigMaps and
Secrets no admitted pod references leave the cache; the QoS tiers are rewritten once a minute.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from agent.cm.cgroups import CgroupError
from agent.cm.containermanager import ContainerManager
from agent.cm.dra.errors import ClaimPrepareError
from agent.container.podrecord import RecordStore
from agent.container.runtime import PodRuntime
from agent.pod.podmanager import PodManager
from agent.pod.podtable import PodTable
from agent.podworkers.types import UpdatePodOptions, UpdateType
from agent.podworkers.workers import PodWorkers
from agent.prober.manager import ProbeManager
from agent.util.configobjects import pod_references
from agent.volumemanager.manager import VolumeManager
from kubenode.model import Pod

log = logging.getLogger("agent.node")

QOS_UPDATE_INTERVAL_S = 60.0  # the kubelet's periodicQOSCgroupUpdateInterval
ORPHAN_GRACE_S = 1  # grace for runtime pods unknown to config, as the kubelet uses


class Housekeeping:
    def __init__(
        self,
        table: PodTable,
        pods: PodManager,
        workers: PodWorkers,
        cm: ContainerManager,
        runtime: PodRuntime,
        volumes: VolumeManager,
        prober: ProbeManager,
        store: RecordStore,
        clock: Callable[[], float],
    ) -> None:
        self.table = table
        self.pods = pods
        self.workers = workers
        self.cm = cm
        self.runtime = runtime
        self.volumes = volumes
        self.prober = prober
        self.store = store
        self._clock = clock
        self._last_qos_update = 0.0
        self._pod_refs: dict[str, tuple[Pod, frozenset[tuple[str, str, str]]]] = {}

    def run(self) -> None:
        """One round; the node calls it once every source has delivered its first snapshot."""
        # Listed before the workers are asked what they know (as the kubelet's HandlePodCleanups does):
        # a pod added meanwhile gets its worker before its cgroup, so it is never taken for an orphan.
        pod_cgroups = set(self.cm.cgroups.list_pods())
        # Pods holding DRA claims in the checkpoint (one deleted while the agent was down, or killed
        # between a claim's "preparing" and its record): their claims are unprepared like the rest.
        claim_holders = self.cm.claim_holders()
        volume_dirs = self.volumes.pod_uids_on_disk()
        # With a CRI runtime: pods it holds a sandbox or container of, record and cgroup or not (an agent
        # killed between RunPodSandbox and its record, a pod deleted while the agent was down).
        held = getattr(self.runtime, "held_pods", None)
        in_runtime: set[str] = held() if held is not None else set()
        with self.table.lock:
            admitted = [
                p
                for uid, p in self.table.desired.items()
                if uid not in self.table.rejected and uid not in self.table.held
            ]
            # Still under the agent's lock (order agent -> workers): a pod a source adds meanwhile
            # would reach the workers without being in `admitted`, be taken for an orphan and killed.
            self.workers.sync_known_pods(admitted)
        with self.table.lock:
            for uid in list(self.table.held):
                pod = self.table.held[uid]
                if not self.pods.name_busy(pod):
                    del self.table.held[uid]
                    self.table.desired.pop(uid, None)
                    self.pods.add(pod)
            known = set(self.workers.known_uids())
            for pod in admitted:
                if pod.uid not in known and pod.uid in self.table.desired:
                    self.workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod))
            known = set(self.workers.known_uids())
            wanted = set(self.table.desired)
            stale_records = {uid for uid in self.table.records if uid not in wanted and uid not in known}
            records = set(self.table.records)
        self._cleanup_orphans(stale_records | ((pod_cgroups | in_runtime | claim_holders) - known - wanted))
        # Volumes of pods nobody knows (the agent was killed between a pod's end and its cleanup).
        # The ConfigMaps and Secrets no active pod references leave the cache (the kubelet's UnregisterPod).
        self.volumes.objects.forget_except(self._referenced_objects(admitted))
        # Listed before the workers were asked, like the cgroups: a pod added meanwhile is never taken.
        for uid in self.volumes.cleanup_orphans(volume_dirs - known - wanted - records):
            log.info("removed the volumes of orphaned pod %s", uid)
        now = self._clock()
        if now - self._last_qos_update >= QOS_UPDATE_INTERVAL_S:
            self._last_qos_update = now
            self.cm.update_qos(self.pods.active_pods())

    def _referenced_objects(self, pods: Iterable[Pod]) -> set[tuple[str, str, str]]:
        """The ConfigMaps and Secrets these pods reference, worked out once per Pod object (a pod keeps its
        object until it changes; housekeeping asks every 2 s for every pod)."""
        refs: set[tuple[str, str, str]] = set()
        known: dict[str, tuple[Pod, frozenset[tuple[str, str, str]]]] = {}
        for pod in pods:
            cached = self._pod_refs.get(pod.uid)
            if cached is None or cached[0] is not pod:
                cached = (pod, frozenset(pod_references(pod)))
            known[pod.uid] = cached
            refs |= cached[1]
        self._pod_refs = known
        return refs

    def _cleanup_orphans(self, orphans: Iterable[str]) -> None:
        """Stop and remove what runs for pods nobody wants (from a previous run, or removed while down)."""
        for uid in sorted(orphans):
            record = self.table.drop_record(uid)
            log.info("stopping orphaned pod %s", record.key if record else uid)
            self.prober.remove_pod(uid)
            try:
                self.runtime.kill_pod(uid, record, self.cm.cgroups, lambda: ORPHAN_GRACE_S)
                self.cm.cgroups.destroy(uid)
                self.volumes.unmount_pod(uid)
            except (CgroupError, RuntimeError) as exc:
                log.warning("cleaning up orphaned pod %s: %s", uid, exc)
                continue
            if self.cm.devices is not None:
                self.cm.devices.free_pod(uid)
            try:
                self.cm.unprepare_claims(uid)
            except ClaimPrepareError as exc:  # kept in the DRA checkpoint: unprepared when the driver answers
                log.warning("orphaned pod %s: unpreparing its claims: %s", uid, exc)
            self.runtime.forget(uid)
            self.store.delete(uid)
            if record is not None:
                self.runtime.remove_logs(record.namespace, record.name, uid)
