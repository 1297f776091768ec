"""SyncPod, SyncTerminatingPod and SyncTerminatedPod: what the pod workers call for one pod.

The kubelet's syncPod family (pkg/kubelet/kubelet.go). Flow of `sync_pod`: every volume ready
(the volume manager's mount_pod; a failure is a FailedMount Warning event per volume and a retry
with the volume manager's backoff, no container starts) -> the pod's resource claims prepared by their
DRA drivers (agent/cm/dra; a failure is a FailedPrepareDynamicResources Warning and a retry with the
workers' backoff, no container starts) -> devices for every
container from the device manager (its Allocate; a failure before the pod ever ran fails it
for good with UnexpectedAdmissionError, as the kubelet's admission-time allocation does) ->
the exclusive CPUs the CPU plugin returned in KUBENODE_CPUSET claimed in the CPU pool (the
other pods' cpusets rewritten) -> the QoS tiers updated for a new Burstable pod -> the pod cgroup
ensured with its cpuset -> containers whose liveness or startup probe failed killed -> the
containers started or restarted by the process runtime, each in its own mount namespace with
its volumeMounts -> the pod's probes started (agent/prober).
`sync_terminating_pod`: SIGTERM, the grace period, SIGKILL, the final phase.
`sync_terminated_pod`: the pod's claims unprepared, the probes stopped, the pod cgroup removed, its volumes
unmounted and removed, devices and CPUs freed, the record dropped
unless a source still wants the pod.

`PodSyncer` is handed its collaborators by agent/node.py: the node's PodTable (the records), the
container manager, the runtime, the volume manager, the prober and the record store, and callbacks into the
node (the active pods, a resync of the other pods when the shared CPU pool changed, the loop's wake-up,
observers and pod events).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from agent.cm.containermanager import ContainerManager, PodAllocation
from agent.cm.devicemanager import DeviceManagerError
from agent.cm.dra.errors import ClaimPrepareError
from agent.container.podrecord import PodRecord, RecordStore
from agent.container.runtime import PodRuntime
from agent.pod.podtable import PodTable
from agent.podworkers.types import SyncContext, SyncResult, UpdateType
from agent.podworkers.workers import TERMINAL_PHASES
from agent.prober.containers import unhealthy_containers
from agent.prober.manager import ProbeManager
from agent.volumemanager.manager import VolumeManager, VolumeSetupError
from kubenode.model import Pod, QOSClass

log = logging.getLogger("agent.node")


class PodSyncer:
    def __init__(
        self,
        table: PodTable,
        cm: ContainerManager,
        runtime: PodRuntime,
        volumes: VolumeManager,
        prober: ProbeManager,
        store: RecordStore,
        *,
        active_pods: Callable[[], list[Pod]],
        resync_others: Callable[[str], None],
        wake: Callable[[], None],
        observe: Callable[[str, str, float | None], None],
        pod_event: Callable[[Pod, str, str, str], None],
    ) -> None:
        self.table = table
        self.cm = cm
        self.runtime = runtime  # the process runtime, or with a CRI endpoint the selector over both
        self.volumes = volumes
        self.prober = prober
        self.store = store
        self._active_pods = active_pods
        self._resync_others = resync_others  # the shared CPU pool changed: every other pod's cpuset follows
        self._wake = wake  # the node's loop: housekeeping may release held pods
        self._observe = observe
        # (pod, type, reason, message): the kubelet's events about a pod as a whole (FailedMount).
        self._pod_event = pod_event

    def sync_pod(self, update_type: UpdateType, pod: Pod, ctx: SyncContext) -> SyncResult:
        record = self.table.record(pod)
        started = time.monotonic()
        try:
            result = self._sync_pod(pod, record, ctx)
        except Exception as exc:
            # Visible in status until a sync succeeds (the workers retry with backoff).
            record.reason, record.message = "SyncError", str(exc)
            raise
        finally:
            self._observe(pod.uid, update_type.name.lower(), started)
        if record.reason == "SyncError":
            record.reason = record.message = ""
        return result

    def _sync_pod(self, pod: Pod, record: PodRecord, ctx: SyncContext) -> SyncResult:
        if record.phase in TERMINAL_PHASES:
            return SyncResult(terminal=True)
        record.qos = pod.qos_class.value
        try:
            volumes = self.volumes.mount_pod(pod)
        except VolumeSetupError as exc:
            for message in exc.messages():
                log.warning("pod %s: %s", pod.key, message)
                self._pod_event(pod, "Warning", "FailedMount", message)
            return SyncResult(requeue_after=exc.retry_after)
        try:
            allocation = self.cm.allocate(pod)
        except ClaimPrepareError as exc:
            # The kubelet's FailedPrepareDynamicResources: no container starts; the workers back off, retry.
            log.warning("pod %s: preparing dynamic resources: %s", pod.key, exc)
            self._pod_event(pod, "Warning", "FailedPrepareDynamicResources", str(exc))
            raise
        except DeviceManagerError as exc:
            if record.containers:
                raise  # it ran before: retry (with backoff) rather than fail a running pod
            # The kubelet allocates devices at admission, and a failure there fails the pod for good.
            record.phase, record.reason = "Failed", "UnexpectedAdmissionError"
            record.message = f"Allocate failed due to {exc}, which is unexpected"
            log.warning("pod %s: %s", pod.key, record.message)
            return SyncResult(terminal=True)
        self._record_devices(pod, record, allocation)
        if allocation.pool_changed:
            self._resync_others(pod.uid)
        cpuset = allocation.cpuset
        if ctx.cancelled.is_set():
            return SyncResult()
        if not self.cm.cgroups.exists(pod):
            if self.runtime.running_pids(pod.uid):
                # The pod cgroup vanished under running processes: kill them, then recreate (kubelet SyncPod).
                log.warning("pod %s: pod cgroup missing while containers run; restarting them", pod.key)
                self.runtime.kill_pod(pod.uid, record, self.cm.cgroups, lambda: 1)
                if pod.restart_policy == "Never":
                    return SyncResult(terminal=True)
            if pod.qos_class == QOSClass.BURSTABLE:
                # Only the burstable tier's shares follow the pods (the sum of their CPU requests); the other
                # tiers are set at start and checked by housekeeping, so no other pod changes a tier.
                self.cm.update_qos([p for p in self._active_pods() if p.uid != pod.uid] + [pod])
        info = self.cm.cgroups.ensure(pod, cpuset)
        record.cgroup, record.cpuset = info.name, cpuset or ""
        if ctx.cancelled.is_set():
            return SyncResult()
        self._kill_unhealthy(pod, record)
        hint = self.runtime.sync_containers(
            pod,
            record,
            self.cm.cgroups.procs_files(pod),
            allocation.resources,
            ctx.cancelled,
            volumes,
            fresh_cgroup=info.created,
        )
        self.prober.add_pod(pod)
        if record.phase in TERMINAL_PHASES:
            return SyncResult(terminal=True)
        return SyncResult(requeue_after=hint)

    def _kill_unhealthy(self, pod: Pod, record: PodRecord) -> None:
        """The kubelet's computePodActions for probes: a container whose liveness or startup probe failed is
        killed (Killing event, the probe's grace or the pod's); sync_containers then restarts it."""
        for unhealthy in unhealthy_containers(self.prober, pod, record):
            log.info("pod %s: %s", pod.key, unhealthy.message)
            self.prober.event(pod, unhealthy.container, "Normal", "Killing", unhealthy.message)
            self.runtime.kill_container(record, unhealthy.container, unhealthy.grace)

    def _record_devices(self, pod: Pod, record: PodRecord, allocation: PodAllocation) -> None:
        """What the containers that hold devices got, in the record (the status endpoint shows it)."""
        for name in allocation.with_devices:
            record.resources[name] = allocation.resources[name]
        if self.cm.devices is not None and allocation.with_devices:
            record.devices = {
                a.container: {r: list(ids) for r, ids in a.devices.items()}
                for a in self.cm.devices.allocations()
                if a.pod.uid == pod.uid
            }

    def sync_terminating_pod(self, pod: Pod, ctx: SyncContext) -> None:
        record = self.table.record(pod)
        started = time.monotonic()
        self._observe(pod.uid, "killing", None)
        self.runtime.kill_pod(pod.uid, record, self.cm.cgroups, ctx.grace_period, ctx.cancelled)
        if record.phase not in TERMINAL_PHASES:
            codes = [c.exit_code for c in record.containers.values() if not c.init]
            record.phase = "Succeeded" if codes and all(code == 0 for code in codes) else "Failed"
        self.store.save(record)
        self._observe(pod.uid, "kill", started)

    def sync_terminated_pod(self, pod: Pod, ctx: SyncContext) -> None:
        try:
            self.cm.unprepare_claims(pod.uid)  # its containers are gone (sync_terminating_pod)
        except ClaimPrepareError as exc:
            # Kept in the DRA checkpoint; unprepared once its driver answers (it registers, next unprepare).
            log.warning("pod %s: unpreparing dynamic resources: %s", pod.key, exc)
            self._pod_event(pod, "Warning", "FailedUnprepareDynamicResources", str(exc))
        self.cm.cgroups.destroy(pod.uid)
        self.volumes.unmount_pod(pod.uid)
        if self.cm.release(pod.uid):
            self._resync_others(pod.uid)
        self.runtime.forget(pod.uid)
        self.prober.remove_pod(pod.uid)
        with self.table.lock:
            wanted = pod.uid in self.table.desired
            if not wanted:
                self.table.drop_record(pod.uid)
        if wanted:
            self.store.save(self.table.record(pod))
        else:
            self.store.delete(pod.uid)
            self.runtime.remove_logs(pod.namespace, pod.name, pod.uid)
        self.cm.update_qos(self._active_pods())
        log.info("pod %s (%s) terminated and cleaned up", pod.key, pod.uid)
        self._wake()  # housekeeping can release held pods now
        self._observe(pod.uid, "terminated", None)
