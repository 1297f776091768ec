"""Watch streams: chunked lines, resume, 410 Expired, bookmarks, sendInitialEvents, selector
transitions, timeoutSeconds, and a stuck watcher that must not block anyone."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from harness.apiserver import ApiServerProcess
from tests.apiserver.test_rest import PODS, created, pod


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServerProcess]:
    # A small window, so that a few writes push a revision out of it.
    with ApiServerProcess(
        args=["--default-watch-cache-size", "40", "--watch-bookmark-interval", "0.3s"]
    ) as server:
        yield server


class Stream:
    """A watch response read line by line in a thread (so a test can write meanwhile)."""

    def __init__(self, api: ApiServerProcess, query: str, path: str = PODS) -> None:
        request = urllib.request.Request(
            f"{api.url}{path}?watch=1&{query}", headers={"Authorization": f"Bearer {api.token}"}
        )
        self.response = urllib.request.urlopen(request, timeout=30, context=api.ssl_context())
        self.headers = self.response.headers
        self.events: list[dict[str, Any]] = []
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self.response:
                self.events.append(json.loads(line))
        except (OSError, ValueError):
            pass
        finally:
            self.ended.set()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.events) < count and time.monotonic() < deadline and not self.ended.is_set():
            time.sleep(0.02)
        assert len(self.events) >= count, f"got {len(self.events)} events, wanted {count}: {self.events}"
        return self.events

    def close(self) -> None:
        # Shut the socket down first: close() alone waits for the reader thread's blocking read.
        sock = getattr(getattr(self.response.fp, "raw", None), "_sock", None)
        if isinstance(sock, socket.socket):
            sock.shutdown(socket.SHUT_RDWR)
        self.ended.wait(5)
        self.response.close()


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"].get("metadata", {}).get("name", "")) for e in events]


def test_watch_is_chunked_and_resumes_from_a_revision(api: ApiServerProcess) -> None:
    rv = created(api, PODS, pod("w1"))["metadata"]["resourceVersion"]
    stream = Stream(api, f"resourceVersion={rv}&timeoutSeconds=10")
    assert stream.headers["Transfer-Encoding"] == "chunked"
    created(api, PODS, pod("w2"))
    api.request("DELETE", PODS + "/w1")
    events = stream.wait_for(2)
    assert summary(events[:2]) == [("ADDED", "w2"), ("DELETED", "w1")]
    assert int(events[1]["object"]["metadata"]["resourceVersion"]) > int(
        events[0]["object"]["metadata"]["resourceVersion"]
    )
    stream.close()


def test_watch_without_revision_starts_with_current_state(api: ApiServerProcess) -> None:
    created(api, PODS, pod("w-state"))
    stream = Stream(api, "timeoutSeconds=5&fieldSelector=metadata.name%3Dw-state")
    assert summary(stream.wait_for(1)) == [("ADDED", "w-state")]
    stream.close()


def test_too_old_revision_gets_in_band_410(api: ApiServerProcess) -> None:
    first = created(api, PODS, pod("old-0"))["metadata"]["resourceVersion"]
    for i in range(1, 50):  # more than the window of 40 events
        created(api, PODS, pod(f"old-{i}"))
    stream = Stream(api, f"resourceVersion={first}")
    events = stream.wait_for(1)
    assert stream.ended.wait(5), "the server must close the stream after the error"
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["code"] == 410 and status["reason"] == "Expired"
    assert status["message"].startswith(f"too old resource version: {first} (")


def test_send_initial_events_ends_with_annotated_bookmark(api: ApiServerProcess) -> None:
    path = "/api/v1/namespaces/kube-system/pods"
    created(api, path, pod("init-a"))
    created(api, path, pod("init-b"))
    query = (
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10"
    )
    stream = Stream(api, query, path)
    events = stream.wait_for(3)
    assert summary(events[:2]) == [("ADDED", "init-a"), ("ADDED", "init-b")]
    bookmark = events[2]
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(
        events[1]["object"]["metadata"]["resourceVersion"]
    )
    stream.close()


def bind_then_delete(api: ApiServerProcess, name: str, node: str) -> None:
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"name": node}}
    assert api.request("POST", f"{PODS}/{name}/binding", binding)[0] == 201
    api.request("DELETE", f"{PODS}/{name}", {"gracePeriodSeconds": 0})


def test_field_selector_watch_sees_a_pod_arrive_and_leave(api: ApiServerProcess) -> None:
    created(api, PODS, pod("moving"))
    stream = Stream(api, f"resourceVersion={api.request('GET', PODS)[1]['metadata']['resourceVersion']}"
                    "&fieldSelector=spec.nodeName%3Dnode-w&timeoutSeconds=10")  # fmt: skip
    bind_then_delete(api, "moving", "node-w")
    assert summary(stream.wait_for(2)[:2]) == [("ADDED", "moving"), ("DELETED", "moving")]
    stream.close()


def test_timeout_seconds_ends_the_stream(api: ApiServerProcess) -> None:
    started = time.monotonic()
    stream = Stream(api, "timeoutSeconds=1&resourceVersion=0")
    # Ends by itself (without timeoutSeconds a watch lasts 30-60 min), not before the second is up; no upper
    # bound on the clock, which a loaded machine would stretch.
    assert stream.ended.wait(60)
    assert time.monotonic() - started >= 0.9


def test_stuck_watcher_blocks_neither_writes_nor_other_watchers(api: ApiServerProcess) -> None:
    host, port = api.url.removeprefix("https://").rsplit(":", 1)
    context = api.ssl_context()
    raw = context.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = (
        f"GET {PODS}?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {api.token}\r\n\r\n"
    )
    raw.sendall(request.encode())  # ... and never read the response
    try:
        healthy = Stream(
            api,
            f"resourceVersion={api.request('GET', PODS)[1]['metadata']['resourceVersion']}&timeoutSeconds=30",
        )
        big = pod("big")
        started = time.monotonic()
        # 20 MB of events: more than the kernel's socket buffers (4 MiB) plus the 8 MiB a watcher may
        # leave unread. (In an env value: kube allows annotations of 256 KiB in all.)
        big["spec"]["containers"][0]["env"] = [{"name": "PAD", "value": "x" * 1_000_000}]
        for i in range(20):
            big["metadata"] = {"name": f"stuck-{i}"}
            created(api, PODS, big)
        assert time.monotonic() - started < 20
        assert len(healthy.wait_for(20)) >= 20
        healthy.close()
        # Far more than 8 MiB left unread: the server has cut the stuck watcher's connection.
        assert api.process is not None
        server = psutil.Process(api.process.pid)
        stuck_port = raw.getsockname()[1]
        deadline = time.monotonic() + 15
        while any(c.raddr and c.raddr.port == stuck_port for c in server.net_connections("tcp")):
            assert time.monotonic() < deadline, "the stuck watcher's connection is still open"
            time.sleep(0.1)
    finally:
        raw.close()


def test_ssl_is_required(api: ApiServerProcess) -> None:
    plain = api.url.replace("https://", "http://")
    with pytest.raises((OSError, ssl.SSLError)):
        urllib.request.urlopen(plain + "/readyz", timeout=5).read()


def test_idle_watch_gets_bookmarks_at_the_current_revision(api: ApiServerProcess) -> None:
    """kube's promise: bookmarks on an idle watch every interval (0.3 s on this module's server) and one
    shortly before timeoutSeconds ends, each at the cache's revision even when the selector hides the
    event that moved it. The test waits for the stream's end, which the server owes at timeoutSeconds."""
    rv = created(api, PODS, pod("bookmarked"))["metadata"]["resourceVersion"]
    stream = Stream(
        api, f"resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=4&labelSelector=none%3Dx"
    )
    created(api, PODS, pod("after-bookmark"))  # filtered out by the selector; the bookmark still moves on
    assert stream.ended.wait(30), "the watch outlived its timeoutSeconds"
    assert stream.events and all(e["type"] == "BOOKMARK" for e in stream.events), stream.events
    assert all(e["object"]["kind"] == "Pod" for e in stream.events)
    assert all(set(e["object"]["metadata"]) == {"resourceVersion"} for e in stream.events)
    # A stream that missed one wake-up (a timer that fired early) would stop sending: ~13 are due in 4 s.
    assert len(stream.events) >= 6, stream.events
    assert int(stream.events[-1]["object"]["metadata"]["resourceVersion"]) > int(rv)
    quiet = Stream(api, f"resourceVersion={rv}&timeoutSeconds=1")
    assert quiet.ended.wait(5) and not [e for e in quiet.events if e["type"] == "BOOKMARK"]


def test_bookmarks_come_every_interval_and_once_two_seconds_before_the_deadline() -> None:
    """kube's cacher (nextBookmarkTime): every bookmarkFrequency, but always one up to 2 s before the
    watch's deadline; after that one, none until the end."""
    from apiserver.handlers.watch import next_bookmark_at

    # A 300 s watch on a 60 s interval: periodic bookmarks, then the one at 298 s.
    assert next_bookmark_at(0.0, 60.0, 300.0, final_sent=False) == 60.0
    assert next_bookmark_at(240.0, 60.0, 300.0, final_sent=False) == 298.0
    assert next_bookmark_at(298.0, 60.0, 300.0, final_sent=True) == float("inf")
    # A 10 s watch: its only bookmark at 8 s; one of 1 s gets its bookmark at once.
    assert next_bookmark_at(0.0, 60.0, 10.0, final_sent=False) == 8.0
    assert next_bookmark_at(0.0, 60.0, 1.0, final_sent=False) == 0.0
    # A short interval goes on until the deadline once the final bookmark has gone.
    assert next_bookmark_at(8.5, 0.3, 10.0, final_sent=True) == 8.8


def test_node_watchers_each_get_exactly_their_pods_events(api: ApiServerProcess) -> None:
    """Pod watchers indexed by spec.nodeName: the bound node's watcher sees the pod arrive and go, the
    unbound watcher sees it leave on binding, another node's watcher sees nothing of it."""
    rv = api.request("GET", PODS)[1]["metadata"]["resourceVersion"]
    base = f"resourceVersion={rv}&timeoutSeconds=20&fieldSelector="
    on_a = Stream(api, base + "spec.nodeName%3Didx-a")
    on_b = Stream(api, base + "spec.nodeName%3Didx-b")
    unbound = Stream(api, base + "spec.nodeName%3D")
    labelled = Stream(api, f"resourceVersion={rv}&timeoutSeconds=20&labelSelector=run%3Didx")
    created(api, PODS, {**pod("idx-moving"), "metadata": {"name": "idx-moving", "labels": {"run": "idx"}}})
    bind_then_delete(api, "idx-moving", "idx-a")
    created(api, PODS, pod("idx-marker", nodeName="idx-b"))  # the last event: b's first and only one
    assert summary(on_a.wait_for(2)) == [("ADDED", "idx-moving"), ("DELETED", "idx-moving")]
    assert summary(unbound.wait_for(2)[:2]) == [("ADDED", "idx-moving"), ("DELETED", "idx-moving")]
    assert summary(labelled.wait_for(3)) == [
        ("ADDED", "idx-moving"),
        ("MODIFIED", "idx-moving"),
        ("DELETED", "idx-moving"),
    ]
    assert summary(on_b.wait_for(1)) == [("ADDED", "idx-marker")]
    for stream in (on_a, on_b, unbound, labelled):
        stream.close()
    assert summary(on_a.events) == [("ADDED", "idx-moving"), ("DELETED", "idx-moving")]
