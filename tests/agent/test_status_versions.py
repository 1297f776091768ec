"""The status manager's periodic resync (agent/status/statusmanager.py) computes a pod's status again only
when the pod was synced since its status was last computed (its status version is newer), as the kubelet's
syncBatch sends only the statuses newer than the ones it sent; a forced resync (mirror pods appeared)
computes every pod; a pod whose record is gone is forgotten. No server: the client counts PATCHes."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

import agent.status.statusmanager as statusmanager
from agent.container.podrecord import PodRecord
from agent.container.podview import PodView
from agent.status import podstatus
from agent.status.statusmanager import StatusManager
from kubenode.model.parse import parse_pod
from tests.agent.support import wait_until

UID = "0b6c4bd2-7a4e-4f0e-9d3c-1c2b3a4d5e6f"


class Prober:
    def status(self, uid: str, container: str, running: bool) -> tuple[bool, bool]:
        return running, running


class Workers:
    def is_finished(self, uid: str) -> bool:
        return False


class Agent:
    """What the status manager asks of NodeAgent: the pods with a record, and their views."""

    def __init__(self) -> None:
        pod = parse_pod(
            {
                "metadata": {"name": "p", "namespace": "default", "uid": UID},
                "spec": {"nodeName": "n", "containers": [{"name": "main", "command": ["/pause"]}]},
            },
            "api",
        )
        self.known = {UID: PodView(pod, PodRecord(UID, "default", "p"), "sync")}
        self.prober = Prober()
        self.workers = Workers()
        self.views = self  # NodeAgent.views: the pods with a record, and their views

    def record_uids(self) -> set[str]:
        return set(self.known)

    def pod_views(self, uids: Any) -> dict[str, PodView]:
        return {uid: self.known[uid] for uid in uids if uid in self.known}


class Client:
    def __init__(self) -> None:
        self.patches = 0

    def patch(self, *args: Any, **kwargs: Any) -> None:
        self.patches += 1


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The UID of each status computed."""
    seen: list[str] = []
    real = podstatus.api_pod_status

    def counted(pod: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append(pod.uid)
        return real(pod, *args, **kwargs)

    monkeypatch.setattr(statusmanager, "api_pod_status", counted)
    return seen


def round_of(manager: StatusManager, *, resync: bool) -> None:
    """One dispatch round (a periodic resync when `resync`), waited for until its writes are done."""
    manager._dispatch(-math.inf if resync else time.monotonic())
    wait_until(lambda: not manager._in_flight, 10, "the round's writes")


def test_a_periodic_resync_computes_only_pods_synced_since(computed: list[str]) -> None:
    agent, client = Agent(), Client()
    manager = StatusManager(client, agent, "10.0.0.1", resync_interval=3600)  # type: ignore[arg-type]
    try:
        round_of(manager, resync=True)  # never computed: computed now, and written
        assert computed == [UID] and client.patches == 1
        round_of(manager, resync=True)
        round_of(manager, resync=True)
        assert computed == [UID]  # nothing changed: not computed again
        manager.pod_synced(UID, "sync", 0.01)
        round_of(manager, resync=False)
        assert computed == [UID, UID] and client.patches == 1  # computed, equal: not written
        manager.pod_synced(UID, "sync", 0.01)
        round_of(manager, resync=True)
        round_of(manager, resync=True)
        assert computed == [UID] * 3
        manager.resync()  # forced (mirror pods appeared): every pod
        round_of(manager, resync=False)
        assert computed == [UID] * 4
        del agent.known[UID]  # the record is gone: the pod is forgotten, and not computed again
        round_of(manager, resync=True)
        round_of(manager, resync=True)
        assert computed == [UID] * 4 and UID not in manager._computed and UID not in manager._versions
    finally:
        manager.stop()
