"""The pod manager and admission: what the sources want, diffed into adds, updates and removals.

The kubelet's podManager with HandlePodAdditions, HandlePodUpdates and HandlePodRemoves. Flow: a
source's snapshot -> `on_snapshot` -> a UID gone from it is `_remove`d (a kill for the pod
workers; a rejected pod's record is dropped) -> a new pod is `add`ed: held while an earlier pod
of the same namespace/name still terminates; otherwise admitted by `agent.lifecycle.admission.admit`
against the active pods and the node's allocatable, then by the Topology Manager when a policy other
than none is set (agent/cm/topologymanager: it allocates the devices of an admitted pod with the merged
NUMA affinity; a refused pod gets TopologyAffinityError and keeps no device) (pods adopted from the
previous run are not admitted again), held as WaitingForDevicePlugin while the plugin of a missing
extended resource may still register, or rejected with phase Failed; an admitted pod goes to the workers as a
create -> a changed pod is `_update`d (an update for its worker); a pod whose only change is the condition
of one of its readiness gates replaces the desired pod without a sync, and its status is computed again.

`PodManager` works on the node's `PodTable` (podtable.py) and hands pods to the pod workers it is given;
agent/node.py builds it and runs the loop, agent/podworkers/podsync.py the syncs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from agent.apis.config import AgentConfig
from agent.cm.containermanager import ContainerManager
from agent.config.sources import SourceSnapshot
from agent.container.podrecord import PodRecord, RecordStore
from agent.lifecycle.admission import Rejection, admit
from agent.pod.podtable import PodTable
from agent.podworkers.types import UpdatePodOptions, UpdateType, WorkType
from agent.podworkers.workers import TERMINAL_PHASES, PodWorkers
from agent.prober.spec import gate_conditions
from kubenode.model import Pod

if TYPE_CHECKING:
    pass

log = logging.getLogger("agent.node")


class PodManager:
    def __init__(
        self,
        config: AgentConfig,
        table: PodTable,
        workers: PodWorkers,
        cm: ContainerManager,
        store: RecordStore,
        *,
        observe: Callable[[str, str], None],
        base_allocatable: Mapping[str, int],
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self.table = table
        self.workers = workers
        self.cm = cm
        self.store = store
        self._observe = observe  # (uid, operation): a rejection, or a readiness gate's change
        self._base_allocatable = dict(base_allocatable)
        self._clock = clock
        self._started_at = clock()
        # While a snapshot is applied: the active pods, kept up to date as its adds are admitted, so
        # admitting 110 new pods counts the active ones once rather than once per pod (None: count them at
        # the next add).
        self._admitting: dict[str, Pod] | None = None
        self._in_snapshot = False

    def started(self) -> None:
        """The agent starts now: a device plugin may take `device_plugin_wait` from here to register."""
        self._started_at = self._clock()

    def on_snapshot(self, snapshot: SourceSnapshot) -> None:
        with self.table.lock:
            self._in_snapshot = True
            try:
                self._apply_snapshot(snapshot)
            finally:
                self._in_snapshot, self._admitting = False, None

    def _apply_snapshot(self, snapshot: SourceSnapshot) -> None:
        self.table.errors[snapshot.source] = snapshot.errors
        before = self.table.by_source.get(snapshot.source, set())
        now = {pod.uid: pod for pod in snapshot.pods}
        self.table.by_source[snapshot.source] = set(now)
        for uid in sorted(before - set(now)):
            self._remove(uid)
        for pod in sorted(snapshot.pods, key=lambda p: (p.creation_timestamp, p.key)):
            known = self.table.desired.get(pod.uid)
            if known is None:
                self.add(pod)
            elif pod is known:
                # The source's own object, unchanged since the last snapshot (a source keeps the Pod it
                # parsed): nothing to compare. A snapshot follows every watch event, so comparing every
                # pod's fields each time cost O(pods of the node) per event.
                continue
            elif pod != known:
                self._update(pod)
            elif gate_conditions(pod) != gate_conditions(known):
                # Only the API status moved, and with it a readiness gate's condition: no sync, but the
                # pod's Ready condition is computed again (agent/status/podstatus.py).
                self.table.desired[pod.uid] = pod
                self._observe(pod.uid, "gates")

    def add(self, pod: Pod) -> None:
        self.table.desired[pod.uid] = pod
        if self.name_busy(pod):
            log.info("pod %s (%s) waits for its earlier version to terminate", pod.key, pod.uid)
            self.table.held[pod.uid] = pod
            return
        rejection = None if pod.uid in self.table.adopted else self._admission(pod)
        record = self.table.records.get(pod.uid) or PodRecord(pod.uid, pod.namespace, pod.name)
        record.qos = pod.qos_class.value
        self.table.records[pod.uid] = record
        if rejection is not None and self._plugin_may_still_come(rejection):
            # Device plugins often start after the agent: wait for a while before rejecting.
            self.table.held[pod.uid] = pod
            record.reason = "WaitingForDevicePlugin"
            assert self.cm.devices is not None  # _plugin_may_still_come needs a device manager
            record.message = self.cm.devices.why_unavailable(rejection.reason[len("OutOf") :])
            return
        record.reason = record.message = ""
        if rejection is not None:
            log.warning("pod %s rejected: %s: %s", pod.key, rejection.reason, rejection.message)
            self.table.rejected[pod.uid] = rejection
            record.phase, record.reason, record.message = "Failed", rejection.reason, rejection.message
            self._observe(pod.uid, "reject")
            return
        self.workers.update_pod(UpdatePodOptions(UpdateType.CREATE, pod))
        if self._admitting is not None and self._is_active(pod.uid):
            self._admitting[pod.uid] = pod

    def _plugin_may_still_come(self, rejection: Rejection) -> bool:
        resource = rejection.reason[len("OutOf") :]
        # Registered is not enough: until its plugin's first device list arrives the resource counts 0.
        return (
            "/" in resource
            and self.cm.devices is not None
            and not self.cm.devices.wait_for_resource(resource, 0)
            and self._clock() - self._started_at < self.config.device_plugin_wait
        )

    def _update(self, pod: Pod) -> None:
        self.table.desired[pod.uid] = pod
        self._admitting = None  # its requests may have changed: counted again at the next add
        if pod.uid in self.table.held:
            self.table.held[pod.uid] = pod
        elif pod.uid not in self.table.rejected:
            self.workers.update_pod(UpdatePodOptions(UpdateType.UPDATE, pod))

    def _remove(self, uid: str) -> None:
        pod = self.table.desired.pop(uid, None)
        self._admitting = None
        self.table.held.pop(uid, None)
        if self.cm.topology is not None:
            self.cm.topology.remove_pod(uid)
        if uid in self.table.rejected:
            del self.table.rejected[uid]
            self.table.records.pop(uid, None)
            self.store.delete(uid)
        elif pod is not None:
            self.workers.update_pod(UpdatePodOptions(UpdateType.KILL, pod))

    def name_busy(self, pod: Pod) -> bool:
        for uid, record in self.table.records.items():
            same_name = (
                record.name == pod.name
                and record.namespace == pod.namespace
                and uid != pod.uid
                and uid not in self.table.rejected
            )
            if same_name and not self.workers.is_finished(uid) and self.workers.work_type(uid) is not None:
                return True
        return False

    def active_pods(self) -> list[Pod]:
        """Admitted pods not yet terminated (what admission and the QoS tiers count)."""
        with self.table.lock:
            return [pod for uid, pod in self.table.desired.items() if self._is_active(uid)]

    def _is_active(self, uid: str) -> bool:
        return (
            uid in self.table.desired
            and uid not in self.table.rejected
            and uid not in self.table.held
            and self.workers.work_type(uid) not in (WorkType.TERMINATED,)
            and not self._terminal_record(uid)
        )

    def _terminal_record(self, uid: str) -> bool:
        record = self.table.records.get(uid)
        return record is not None and record.phase in TERMINAL_PHASES

    def allocatable(self) -> dict[str, int]:
        result = dict(self._base_allocatable)
        if self.cm.devices is not None:
            result.update(self.cm.devices.allocatable())
        return result

    def _admission(self, pod: Pod) -> Rejection | None:
        if self._in_snapshot:
            if self._admitting is None:
                self._admitting = {p.uid: p for p in self.active_pods()}
            active = list(self._admitting.values())
        else:
            active = self.active_pods()
        others = [p for p in active if p.uid != pod.uid]
        rejection = admit(pod, others, self.allocatable())
        if rejection is not None or self.cm.topology is None:
            return rejection
        result = self.cm.topology.admit(pod)
        if result.admit:
            return None
        if self.cm.devices is not None:  # what earlier containers of the pod got is given back
            self.cm.devices.free_pod(pod.uid)
        return Rejection(result.reason, result.message)
