"""GPU health state: critical Xids make a GPU unhealthy; passing probes for a while make it healthy again.

Pure logic with the time passed in, so the rules are tested without waiting.
NVIDIA's plugin never recovers a GPU (a restart is needed); we do, after
`recovery_seconds` of uninterrupted passing probes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


class GpuHealth:
    def __init__(self, uuids: Iterable[str], ignored_xids: Iterable[int], recovery_seconds: float) -> None:
        self.ignored_xids = frozenset(ignored_xids)
        self.recovery_seconds = recovery_seconds
        self._unhealthy_since_pass: dict[str, float | None] = {}  # uuid -> start of passing probes
        self._known = set(uuids)
        # Every Xid seen, ignored ones too, for the metrics (DCGM_FI_DEV_XID_ERRORS is the last one).
        self.last_xid: dict[str, int] = {}
        self.xid_count: dict[str, int] = {}

    def healthy(self, uuid: str) -> bool:
        return uuid not in self._unhealthy_since_pass

    def unhealthy(self) -> list[str]:
        return sorted(self._unhealthy_since_pass)

    def on_xid(self, uuid: str, xid: int) -> bool:
        """Record an Xid; returns whether the GPU just became unhealthy."""
        if uuid not in self._known:
            return False
        self.last_xid[uuid] = xid
        self.xid_count[uuid] = self.xid_count.get(uuid, 0) + 1
        if xid in self.ignored_xids:
            log.info("GPU %s: ignored Xid %d (application error)", uuid, xid)
            return False
        was_healthy = self.healthy(uuid)
        self._unhealthy_since_pass[uuid] = None  # restart the recovery clock
        if was_healthy:
            log.warning("GPU %s: critical Xid %d, marked unhealthy", uuid, xid)
        return was_healthy

    def on_probe(self, uuid: str, ok: bool, now: float) -> bool:
        """Record a health probe of an unhealthy GPU; returns whether it just became healthy."""
        if self.healthy(uuid):
            return False
        if not ok:
            self._unhealthy_since_pass[uuid] = None
            return False
        since = self._unhealthy_since_pass[uuid]
        if since is None:
            since = self._unhealthy_since_pass[uuid] = now
        if now - since >= self.recovery_seconds:
            del self._unhealthy_since_pass[uuid]
            log.warning("GPU %s: passed probes for %.0f s, healthy again", uuid, now - since)
            return True
        return False
