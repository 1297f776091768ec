"""The shared client layer against a real `kubenode apiserver` (TLS, bearer tokens): verbs and typed errors,
the informer (sync, handlers, resume after a server restart, relist on 410), the event recorder's
aggregation, Lease create-or-renew, and the pure pieces (time formats, backoff)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import (
    EVENTS,
    LEASES,
    NAMESPACES,
    NODES,
    PODS,
    AlreadyExists,
    Conflict,
    KubeClient,
    NotFound,
    TransportError,
    load_kubeconfig,
)
from kubenode.kubeclient.config import ClientConfig
from kubenode.kubeclient.events import EventRecorder, ObjectReference
from kubenode.kubeclient.informer import Backoff, Informer
from kubenode.kubeclient.lease import LeaseRenewer, renew_lease
from kubenode.kubeclient.timefmt import micro_time, parse_time, rfc3339
from tests.agent.support import wait_until


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServerProcess]:
    # A small watch window, so an old resourceVersion is soon "too old" (410).
    with ApiServerProcess(args=["--default-watch-cache-size", "50"]) as server:
        yield server


@pytest.fixture(scope="module")
def client(api: ApiServerProcess) -> Iterator[KubeClient]:
    c = KubeClient(load_kubeconfig(api.kubeconfig))
    yield c
    c.close()


def _pod(name: str, node: str = "nowhere") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }


def test_micro_time_has_six_digits_and_times_parse() -> None:
    assert micro_time(1700000000.0) == "2023-11-14T22:13:20.000000Z"
    assert micro_time(1700000000.5) == "2023-11-14T22:13:20.500000Z"
    assert rfc3339(1700000000.9) == "2023-11-14T22:13:20Z"
    assert parse_time("2023-11-14T22:13:20.103Z") == pytest.approx(1700000000.103)
    assert parse_time("2023-11-14T22:13:20.123456789+00:00") == pytest.approx(1700000000.123456)
    assert parse_time("2023-11-14T22:13:20Z") == 1700000000.0


def test_backoff_doubles_to_its_cap_with_jitter() -> None:
    backoff = Backoff(1.0, 5.0, rand=lambda: 0.5)
    assert [backoff.next() for _ in range(5)] == [1.5, 3.0, 5.0, 5.0, 5.0]
    backoff.reset()
    assert backoff.next() == 1.5


def test_unreachable_server_is_a_transport_error() -> None:
    client = KubeClient(ClientConfig("http://127.0.0.1:9"))
    with pytest.raises(TransportError):
        client.get(PODS, "x", "default")


def test_verbs_and_typed_errors(client: KubeClient) -> None:
    created = client.create(PODS, _pod("verbs"), "default")
    uid = created["metadata"]["uid"]
    with pytest.raises(AlreadyExists) as exists:
        client.create(PODS, _pod("verbs"), "default")
    assert exists.value.code == 409 and exists.value.reason == "AlreadyExists"
    with pytest.raises(NotFound) as missing:
        client.get(PODS, "nope", "default")
    assert missing.value.code == 404 and "nope" in missing.value.message

    client.patch(PODS, "verbs", {"metadata": {"labels": {"a": "1"}}}, "default", patch_type="merge")
    client.patch(
        PODS,
        "verbs",
        [{"op": "add", "path": "/metadata/labels/b", "value": "2"}],
        "default",
        patch_type="json",
    )
    patched = client.patch(
        PODS,
        "verbs",
        {"metadata": {"uid": uid}, "status": {"phase": "Running"}},
        "default",
        subresource="status",
    )
    assert patched["metadata"]["labels"] == {"a": "1", "b": "2"} and patched["status"]["phase"] == "Running"
    stale = dict(created)
    with pytest.raises(Conflict):
        client.update(PODS, stale)  # its resourceVersion is older than the patches
    with pytest.raises(Conflict):
        client.delete(PODS, "verbs", "default", grace_period_seconds=0, uid="not-the-uid")
    client.delete(PODS, "verbs", "default", grace_period_seconds=0, uid=uid)
    with pytest.raises(NotFound):
        client.get(PODS, "verbs", "default")


def test_list_all_follows_continue(client: KubeClient) -> None:
    for i in range(7):
        client.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"page-{i}"}}
        )
    items, version = client.list_all(NAMESPACES, label_selector="", page_size=3)
    names = {i["metadata"]["name"] for i in items}
    assert {f"page-{i}" for i in range(7)} <= names and version


class _Recorded:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def add(self, obj: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append(("add", obj["metadata"]["name"]))

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append(("update", new["metadata"]["name"]))

    def delete(self, obj: dict[str, Any]) -> None:
        with self.lock:
            self.calls.append(("delete", obj["metadata"]["name"]))

    def of(self, name: str) -> list[str]:
        with self.lock:
            return [kind for kind, n in self.calls if n == name]


def _informer(client: KubeClient, node: str, seen: _Recorded) -> Informer[dict[str, Any]]:
    return Informer(
        client,
        PODS,
        field_selector=f"spec.nodeName={node}",
        on_add=seen.add,
        on_update=seen.update,
        on_delete=seen.delete,
        watch_timeout_s=2,  # watches end and are resumed often
        backoff_initial_s=0.05,
        backoff_max_s=0.5,
    )


def test_informer_syncs_watches_and_resumes_without_relisting(client: KubeClient) -> None:
    seen = _Recorded()
    client.create(PODS, _pod("before", "inf-node"), "default")
    client.create(PODS, _pod("elsewhere", "other-node"), "default")
    informer = _informer(client, "inf-node", seen)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        assert seen.of("before") == ["add"] and not seen.of("elsewhere")
        client.create(PODS, _pod("after", "inf-node"), "default")
        wait_until(lambda: seen.of("after") == ["add"], 5, "the watch ADDED event")
        client.patch(PODS, "after", {"metadata": {"labels": {"x": "y"}}}, "default")
        wait_until(lambda: seen.of("after") == ["add", "update"], 5, "the MODIFIED event")
        # Watches end every 2-4 s (timeoutSeconds) and are resumed from the last resourceVersion.
        wait_until(lambda: informer.watches >= 2, 10, "a resumed watch")
        client.delete(PODS, "after", "default", grace_period_seconds=0)
        wait_until(lambda: seen.of("after") == ["add", "update", "delete"], 5, "the DELETED event")
        assert informer.relists == 1 and seen.of("before") == ["add"]
        assert informer.get("default/before") is not None and informer.get("default/after") is None
    finally:
        informer.stop()


def _label(obj: dict[str, Any] | None, key: str) -> str | None:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return str(labels[key]) if key in labels else None


class _RewindingClient(KubeClient):
    """Once armed, its next watch asks for resourceVersion 1, long compacted away: the server answers 410."""

    rewind = threading.Event()

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        if self.rewind.is_set():
            self.rewind.clear()
            kwargs["resource_version"] = "1"
        return super().watch(*args, **kwargs)


def test_informer_relists_on_410(api: ApiServerProcess) -> None:
    client = _RewindingClient(load_kubeconfig(api.kubeconfig))
    seen = _Recorded()
    informer = _informer(client, "relist-node", seen)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        client.create(PODS, _pod("r1", "relist-node"), "default")
        for i in range(60):  # moves the server's 50-event window past resourceVersion 1
            client.patch(PODS, "r1", {"metadata": {"labels": {"n": str(i)}}}, "default")
        wait_until(lambda: _label(informer.get("default/r1"), "n") == "59", 5, "the patches")
        client.rewind.set()
        informer.drop_watch()
        wait_until(lambda: informer.relists >= 2, 10, "a relist after 410")
        client.delete(PODS, "r1", "default", grace_period_seconds=0)
        wait_until(lambda: seen.of("r1")[-1:] == ["delete"], 5, "the watch after the relist")
        assert seen.of("r1").count("add") == 1  # the relist found nothing new
    finally:
        informer.stop()
        client.close()


def test_informer_reconnects_after_a_server_restart(api: ApiServerProcess, client: KubeClient) -> None:
    seen = _Recorded()
    informer = _informer(client, "restart-node", seen)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        client.create(PODS, _pod("s1", "restart-node"), "default")
        wait_until(lambda: seen.of("s1") == ["add"], 5, "s1 added")
        api.restart()
        client.create(PODS, _pod("s2", "restart-node"), "default")
        wait_until(lambda: seen.of("s2") == ["add"], 10, "s2 added after the restart")
        assert seen.of("s1") == ["add"]  # not added twice, whether it resumed or relisted
    finally:
        informer.stop()


def test_event_recorder_aggregates_like_client_go(client: KubeClient) -> None:
    recorder = EventRecorder(client, "kubelet", "agg-node", retry_interval=0.1)
    recorder.start()
    try:
        pod = ObjectReference("Pod", "agg-pod", "default", "uid-1")
        recorder.event(pod, "Warning", "BackOff", "Back-off restarting failed container")
        recorder.event(pod, "Warning", "BackOff", "Back-off restarting failed container")
        recorder.event(pod, "Warning", "BackOff", "a different message")
        recorder.event(
            ObjectReference("Node", "agg-node", uid="agg-node"), "Normal", "Starting", "Starting kubelet."
        )
        assert recorder.flush(10)
    finally:
        recorder.stop()
    events = client.list(EVENTS, "default", field_selector="involvedObject.name=agg-pod")
    by_message = {e["message"]: e for e in events["items"]}
    assert by_message["Back-off restarting failed container"]["count"] == 2
    assert by_message["a different message"]["count"] == 1
    event = by_message["Back-off restarting failed container"]
    assert event["source"] == {"component": "kubelet", "host": "agg-node"}
    name, _, stamp = event["metadata"]["name"].partition(".")
    assert name == "agg-pod" and int(stamp, 16) > 0
    node_events = client.list(EVENTS, "default", field_selector="involvedObject.name=agg-node")
    assert [e["reason"] for e in node_events["items"]] == ["Starting"]  # cluster-scoped: in default


@pytest.mark.parametrize("asynchronous", [False, True], ids=["threads", "reactor"])
def test_event_recorder_with_several_writers_keeps_each_keys_count(
    api: ApiServerProcess, asynchronous: bool
) -> None:
    # A client of its own (its reactor's TLS connections too), and pods of their own per mode.
    client = KubeClient(load_kubeconfig(api.kubeconfig), async_connections=4)
    recorder = EventRecorder(client, "default-scheduler", writers=4, asynchronous=asynchronous)
    recorder.start()
    prefix = f"many-{asynchronous:d}"
    try:
        for i in range(40):
            ref = ObjectReference("Pod", f"{prefix}-{i % 10}", "default", f"uid-{i % 10}")
            recorder.event(ref, "Normal", "Scheduled", f"Successfully assigned default/many-{i % 10}")
        assert recorder.flush(20)
        recorder.stop()
        items, _ = client.list_all(EVENTS, "default", field_selector="source=default-scheduler")
    finally:
        recorder.stop()
        client.close()
    assert recorder.written == 40 and recorder.dropped == 0
    counts = {
        e["involvedObject"]["name"]: e["count"]
        for e in items
        if e["reason"] == "Scheduled" and e["involvedObject"]["name"].startswith(prefix)
    }
    assert counts == {f"{prefix}-{i}": 4 for i in range(10)}  # one Event per pod, its count raised in order


@pytest.mark.parametrize("asynchronous", [False, True], ids=["threads", "reactor"])
def test_event_recorder_never_blocks_when_the_server_is_gone(asynchronous: bool) -> None:
    recorder = EventRecorder(
        KubeClient(ClientConfig("http://127.0.0.1:9")),
        "kubelet",
        queue_size=5,
        retry_interval=60,
        asynchronous=asynchronous,
    )
    recorder.start()
    try:

        def emit() -> None:
            for i in range(50):
                recorder.event(ObjectReference("Pod", "p", "default"), "Normal", "Started", f"m{i}")

        emitter = threading.Thread(target=emit, daemon=True)
        emitter.start()
        # Done once the calls return: each one only queues (or drops). A caller held until the server answered
        # would wait out the 60 s retry interval: joining for 30 s tells the two apart on any machine's load.
        emitter.join(30)
        assert not emitter.is_alive()
        assert recorder.dropped >= 40
    finally:
        recorder.stop(flush_timeout=0)


def test_lease_create_then_renew_with_micro_time(client: KubeClient) -> None:
    now = [1700000000.0]
    created = renew_lease(client, "kube-node-lease", "lease-test", "me", 40, wall=lambda: now[0])
    assert created["spec"]["renewTime"] == "2023-11-14T22:13:20.000000Z"
    now[0] += 10.25
    renewed = renew_lease(client, "kube-node-lease", "lease-test", "me", 40, wall=lambda: now[0])
    assert renewed["spec"]["renewTime"] == "2023-11-14T22:13:30.250000Z"
    assert renewed["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    with pytest.raises(Conflict):
        client.update(LEASES, created)  # a stale resourceVersion


def test_nodes_are_cluster_scoped_paths(client: KubeClient) -> None:
    assert NODES.path(None, "n1", "status") == "/api/v1/nodes/n1/status"
    assert (
        LEASES.path("kube-node-lease", "n1")
        == "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
    )
    assert PODS.path() == "/api/v1/pods"


def test_lease_renewer_puts_the_lease_it_stored_and_reads_again_after_a_conflict(
    client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the kubelet's lease controller: a GET only for the first renewal and after a failure."""
    gets: list[str] = []
    real_get = client.get

    def counting_get(resource: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        gets.append(name)
        return real_get(resource, name, namespace)

    monkeypatch.setattr(client, "get", counting_get)
    renewer = LeaseRenewer(client, "kube-node-lease", "lease-put-only", "me")
    assert renewer.renew_once() and renewer.renew_once() and renewer.renew_once()
    assert gets == ["lease-put-only"]  # the first renewal looked; the next two PUT what the last stored
    other = real_get(LEASES, "lease-put-only", "kube-node-lease")
    other["spec"]["holderIdentity"] = "someone-else"
    client.update(LEASES, other)
    assert not renewer.renew_once()  # its stored resourceVersion is stale now: 409
    assert renewer.renew_once() and gets == ["lease-put-only"] * 2
    assert real_get(LEASES, "lease-put-only", "kube-node-lease")["spec"]["holderIdentity"] == "me"
