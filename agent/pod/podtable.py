"""The pods this node knows: what the sources want, and what is kept of each (the kubelet's pod manager).

One re-entrant lock guards every map. The pod manager (podmanager.py) fills the desired pods from the
sources' snapshots and decides which are rejected or held; the syncer (agent/podworkers/podsync.py) keeps
each pod's record; the node (agent/node.py) reads both for its loop, housekeeping and status.
"""

from __future__ import annotations

import threading

from agent.config.sources import ManifestError
from agent.container.podrecord import PodRecord
from agent.lifecycle.admission import Rejection
from kubenode.model import Pod


class PodTable:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.desired: dict[str, Pod] = {}  # by UID, every source merged
        self.by_source: dict[str, set[str]] = {}
        self.rejected: dict[str, Rejection] = {}
        self.held: dict[str, Pod] = {}  # adds waiting for their full name to be free, or for a device plugin
        self.records: dict[str, PodRecord] = {}
        self.adopted: set[str] = set()  # records of the previous run: already admitted
        self.errors: dict[str, tuple[ManifestError, ...]] = {}

    def record(self, pod: Pod) -> PodRecord:
        """The pod's record, made on first use."""
        with self.lock:
            record = self.records.get(pod.uid)
            if record is None:
                record = self.records[pod.uid] = PodRecord(pod.uid, pod.namespace, pod.name)
            return record

    def pod_for(self, uid: str) -> Pod | None:
        with self.lock:
            return self.desired.get(uid) or self.held.get(uid)

    def drop_record(self, uid: str) -> PodRecord | None:
        """Forget the pod's record (the pod is gone); returns it."""
        with self.lock:
            self.adopted.discard(uid)
            return self.records.pop(uid, None)
