"""Events: the field selectors kubectl describe uses, and expiry after --event-ttl."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess

EVENTS = "/api/v1/namespaces/default/events"


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServerProcess]:
    with ApiServerProcess(args=["--event-ttl", "3s"]) as server:
        yield server


def event(name: str, kind: str, involved: str, uid: str, when: datetime.datetime) -> dict[str, Any]:
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {
            "kind": kind,
            "name": involved,
            "namespace": "default" if kind == "Pod" else "",
            "uid": uid,
        },
        "reason": "Scheduled",
        "message": "Successfully assigned",
        "type": "Normal",
        "source": {"component": "default-scheduler"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def test_describe_field_selectors(api: ApiServerProcess) -> None:
    now = datetime.datetime.now(datetime.UTC)
    for name, kind, involved, uid in (
        ("e1", "Pod", "web", "u1"),
        ("e2", "Pod", "db", "u2"),
        ("e3", "Node", "n1", "n1"),
    ):
        status, _ = api.request("POST", EVENTS, event(name, kind, involved, uid, now))
        assert status == 201
    selector = "involvedObject.name%3Dweb,involvedObject.namespace%3Ddefault,involvedObject.uid%3Du1"
    status, body = api.request("GET", f"{EVENTS}?fieldSelector={selector}&limit=500")
    assert status == 200 and [e["metadata"]["name"] for e in body["items"]] == ["e1"]
    node_selector = "involvedObject.kind%3DNode,involvedObject.name%3Dn1,involvedObject.namespace%3D"
    status, body = api.request("GET", f"/api/v1/events?fieldSelector={node_selector}")
    assert [e["metadata"]["name"] for e in body["items"]] == ["e3"]
    status, body = api.request("GET", f"{EVENTS}?fieldSelector=source%3Ddefault-scheduler,type%3DNormal")
    assert len(body["items"]) == 3


def test_events_expire_after_the_ttl(api: ApiServerProcess) -> None:
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=10)
    assert api.request("POST", EVENTS, event("stale", "Pod", "x", "ux", old))[0] == 201
    fresh = event(
        "fresh", "Pod", "y", "uy", datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    )
    assert api.request("POST", EVENTS, fresh)[0] == 201
    deadline = time.monotonic() + 15
    while api.request("GET", EVENTS + "/stale")[0] != 404:
        assert time.monotonic() < deadline, "the stale event was not removed"
        time.sleep(0.2)
    assert api.request("GET", EVENTS + "/fresh")[0] == 200
