"""The node's pods as its status endpoint, status manager, mirror pods and metrics see them: one `PodView`
(agent/container/podview.py) per pod the node holds a record of, with what its worker is doing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agent.config.sources import ManifestError, PodSource
from agent.container.podrecord import PodRecord
from agent.container.podview import PodView
from agent.pod.podtable import PodTable
from agent.podworkers.workers import PodWorkers


class PodViews:
    def __init__(self, table: PodTable, workers: PodWorkers, sources: Sequence[PodSource]) -> None:
        self._table = table
        self._workers = workers
        self._sources = sources

    def pods(self) -> list[PodView]:
        with self._table.lock:
            views = [self.view(uid, record) for uid, record in self._table.records.items()]
        return sorted(views, key=lambda v: v.record.key)

    def record_uids(self) -> set[str]:
        """The UIDs of the pods the agent holds a record of (the status manager's resync looks at those)."""
        with self._table.lock:
            return set(self._table.records)

    def pod_views(self, uids: Iterable[str]) -> dict[str, PodView]:
        """The views of these pods only (those with a record), for a caller that handles a few pods a
        round (the status manager) and must not build every pod's view for them."""
        with self._table.lock:
            return {
                uid: self.view(uid, record)
                for uid in uids
                if (record := self._table.records.get(uid)) is not None
            }

    def has_sources_besides(self, source: str) -> bool:
        """Whether a source other than `source` (the API server's) feeds the agent: static pods may come."""
        return any(getattr(other, "name", "") != source for other in self._sources)

    def views_not_from(self, source: str) -> list[PodView]:
        """The views of the pods of every source but `source` (the API server's: the static pods, which the
        mirror-pod round looks at every 2 s), found by the sources' index rather than by looking at every pod.
        """
        with self._table.lock:
            return [
                self.view(uid, record)
                for name, uids in self._table.by_source.items()
                if name != source
                for uid in uids
                if (record := self._table.records.get(uid)) is not None
                and (pod := self._table.desired.get(uid)) is not None
                and pod.source != source
            ]

    def view(self, uid: str, record: PodRecord) -> PodView:
        """Under the table's lock."""
        work = self._workers.work_type(uid)
        worker = "rejected" if uid in self._table.rejected else (work.value if work else "")
        if uid in self._table.held:
            worker = "waiting"
        return PodView(self._table.desired.get(uid), record, worker)

    def manifest_errors(self) -> list[ManifestError]:
        with self._table.lock:
            return [e for errors in self._table.errors.values() for e in errors]
