"""The live scheduler in-process against a real `kubenode apiserver`: bind, ignore, fail, preempt, metrics."""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from kubenode.kubeclient import EVENTS, NODES, PODS, KubeClient, load_kubeconfig
from scheduler.profile import Configuration
from scheduler.runner import LiveScheduler, RunOptions
from tests.scheduler_live.conftest import server_class
from tests.scheduler_live.support import (
    BindingWatch,
    FakeKubelet,
    check_no_overcommit,
    client_for,
    create_all,
    empty_the_cluster,
    node,
    pod,
    wait_for,
)


@pytest.fixture(scope="module")
def apiserver() -> Iterator[Any]:
    """One API server for this module (starting one takes seconds); each test empties it after."""
    with server_class()() as server:
        yield server


@pytest.fixture(scope="module")
def admin(apiserver: Any) -> Iterator[KubeClient]:
    client = client_for(apiserver.kubeconfig)
    yield client
    client.close()


@pytest.fixture(autouse=True)
def empty_cluster(admin: KubeClient) -> Iterator[None]:
    yield
    empty_the_cluster(admin)


@contextlib.contextmanager
def live(apiserver: Any, **options: Any) -> Iterator[LiveScheduler]:
    options.setdefault("config", Configuration())
    scheduler = LiveScheduler(load_kubeconfig(apiserver.kubeconfig), RunOptions(**options))
    scheduler.start()
    try:
        yield scheduler
    finally:
        scheduler.stop()


def get_pod(client: KubeClient, name: str, namespace: str = "default") -> dict[str, Any]:
    return client.get(PODS, name, namespace)


def events_for(client: KubeClient, name: str, reason: str) -> list[dict[str, Any]]:
    items = client.list(EVENTS, "default", field_selector=f"involvedObject.name={name}")["items"]
    return [e for e in items if e.get("reason") == reason]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return {}


def test_pods_of_our_profile_are_bound_once_and_others_left_alone(apiserver: Any, admin: KubeClient) -> None:
    create_all(admin, [node(f"n{i}", cpu="2") for i in range(3)])
    ours = [pod(f"p{i}", cpu="250m") for i in range(20)]
    theirs = [pod("other", scheduler="someone-else")]
    with BindingWatch(admin) as watch, live(apiserver) as scheduler:
        create_all(admin, ours + theirs)
        wait_for(lambda: all(get_pod(admin, f"p{i}")["spec"].get("nodeName") for i in range(20)), 20, "binds")
        assert not get_pod(admin, "other")["spec"].get("nodeName")
        first = get_pod(admin, "p0")
        assert condition(first, "PodScheduled")["status"] == "True"
        event = wait_for(lambda: events_for(admin, "p0", "Scheduled"), 10, "the Scheduled event")[0]
        assert event["message"] == f"Successfully assigned default/p0 to {first['spec']['nodeName']}"
        assert event["type"] == "Normal" and event["source"]["component"] == "default-scheduler"
        # 8 pods of 250m fit a 2-cpu node: 20 pods spread over 3 nodes, none over-full.
        check_no_overcommit(admin)
        assert scheduler.metrics.schedule_attempts.labels("scheduled", "default-scheduler")._value.get() == 20
    watch.assert_bound_at_most_once()


def test_an_unschedulable_pod_gets_its_condition_once_and_an_aggregated_event(
    apiserver: Any, admin: KubeClient
) -> None:
    create_all(admin, [node("small", cpu="1")])
    with live(apiserver) as scheduler:
        create_all(admin, [pod("huge", cpu="3")])
        message = (
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
            "1 No preemption victims found for incoming pod."
        )

        def unschedulable() -> dict[str, Any]:
            cond = condition(get_pod(admin, "huge"), "PodScheduled")
            return cond if cond.get("reason") == "Unschedulable" else {}

        cond = wait_for(unschedulable, 10, "PodScheduled=False")
        assert cond["status"] == "False" and cond["message"] == message
        event = wait_for(lambda: events_for(admin, "huge", "FailedScheduling"), 10, "FailedScheduling")[0]
        assert event["type"] == "Warning" and event["message"] == message and event["count"] == 1
        # A spec/metadata change retries the pod: same message, so the event count rises and
        # the status is not written again.
        wait_for(lambda: scheduler.status.patches == 1, 5, "the first status write to be counted")
        admin.patch(PODS, "huge", {"metadata": {"labels": {"retry": "1"}}}, "default")
        wait_for(lambda: events_for(admin, "huge", "FailedScheduling")[0].get("count") == 2, 10, "count 2")
        assert len(events_for(admin, "huge", "FailedScheduling")) == 1
        assert scheduler.status.patches == 1
        # A node that fits arrives: the pod is moved and bound.
        create_all(admin, [node("big", cpu="4")])
        wait_for(lambda: get_pod(admin, "huge")["spec"].get("nodeName") == "big", 10, "bound to big")


def test_preemption_nominates_marks_and_deletes_victims_then_binds(apiserver: Any, admin: KubeClient) -> None:
    create_all(admin, [node("only", cpu="2")])
    with FakeKubelet(admin) as kubelet, live(apiserver) as scheduler:
        create_all(
            admin, [pod("low-1", cpu="1", priority=1, grace=30), pod("low-2", cpu="1", priority=2, grace=0)]
        )
        wait_for(lambda: scheduler.engine.cache.pods.get("default/low-2"), 10, "low pods bound")
        wait_for(lambda: get_pod(admin, "low-1")["spec"].get("nodeName"), 10, "low-1 bound")
        create_all(admin, [pod("high", cpu="1", priority=100)])
        # The cheaper victim (lowest priority) goes: low-1, with its own 30 s grace (the
        # fake kubelet finishes the deletion).
        wait_for(lambda: "default/low-1" in kubelet.finished, 15, "low-1 evicted")
        wait_for(lambda: get_pod(admin, "high")["spec"].get("nodeName") == "only", 15, "high bound")
        assert get_pod(admin, "low-2")["spec"]["nodeName"] == "only"
        preempted = events_for(admin, "low-1", "Preempted")
        assert preempted and preempted[0]["message"].endswith("on node only")
        assert scheduler.metrics.preemption_attempts._value.get() >= 1
    check_no_overcommit(admin)


def test_a_victim_gets_disruption_target_before_deletion(apiserver: Any, admin: KubeClient) -> None:
    create_all(admin, [node("only", cpu="1")])
    with live(apiserver):
        create_all(admin, [pod("victim", cpu="1", priority=0, grace=60)])
        wait_for(lambda: get_pod(admin, "victim")["spec"].get("nodeName"), 10, "victim bound")
        create_all(admin, [pod("preemptor", cpu="1", priority=10)])
        victim = wait_for(
            lambda: (v := get_pod(admin, "victim"))["metadata"].get("deletionTimestamp") and v, 10, "deletion"
        )
        assert victim["metadata"]["deletionGracePeriodSeconds"] == 60
        target = condition(victim, "DisruptionTarget")
        assert target["status"] == "True" and target["reason"] == "PreemptionByScheduler"
        preemptor = wait_for(
            lambda: (p := get_pod(admin, "preemptor"))["status"].get("nominatedNodeName") and p,
            10,
            "nomination",
        )
        assert preemptor["status"]["nominatedNodeName"] == "only" and not preemptor["spec"].get("nodeName")


def test_metrics_and_healthz(apiserver: Any, admin: KubeClient) -> None:
    create_all(admin, [node("n", cpu="1")])
    with live(apiserver, metrics_address=("127.0.0.1", 0)) as scheduler:
        create_all(admin, [pod("fits", cpu="500m"), pod("never", cpu="8")])
        wait_for(lambda: get_pod(admin, "fits")["spec"].get("nodeName"), 10, "fits bound")
        wait_for(lambda: events_for(admin, "never", "FailedScheduling"), 10, "never fails")
        assert scheduler.metrics_server is not None
        base = f"http://127.0.0.1:{scheduler.metrics_server.port}"
        text = urllib.request.urlopen(base + "/metrics").read().decode()
        for line in (
            'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0',
            'scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"}',
            'scheduler_pending_pods{queue="unschedulable"} 1.0',
            'scheduler_pending_pods{queue="active"} 0.0',
            'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 1.0',
            "scheduler_scheduling_attempt_duration_seconds_bucket",
            "scheduler_preemption_attempts_total",
        ):
            assert line in text, line
        assert urllib.request.urlopen(base + "/healthz").read() == b"ok"


def test_official_client_binding_bug_547_and_its_workaround(apiserver: Any, admin: KubeClient) -> None:
    """kubernetes-client/python #547: the server answers pods/binding with a Status, which the
    client tries to read as a V1Binding and fails on, although the bind succeeded."""
    create_all(admin, [node("n1"), node("n2")])
    create_all(admin, [pod("a", scheduler="manual"), pod("b", scheduler="manual")])
    official = kubernetes.config.new_client_from_config(str(apiserver.kubeconfig))  # type: ignore[no-untyped-call]
    api = kubernetes.client.CoreV1Api(official)

    def body(name: str, target: str) -> Any:
        return kubernetes.client.V1Binding(
            metadata=kubernetes.client.V1ObjectMeta(name=name),
            target=kubernetes.client.V1ObjectReference(kind="Node", api_version="v1", name=target),
        )

    with pytest.raises(ValueError):  # the bug: raised after the server bound the pod
        api.create_namespaced_pod_binding("a", "default", body("a", "n1"))
    assert get_pod(admin, "a")["spec"]["nodeName"] == "n1"
    # The workaround: no deserialisation; the HTTP status tells success.
    response: Any = api.create_namespaced_pod_binding("b", "default", body("b", "n2"), _preload_content=False)
    assert response.status == 201
    assert get_pod(admin, "b")["spec"]["nodeName"] == "n2"
    # A second bind is a 409, which the workaround still surfaces.
    with pytest.raises(kubernetes.client.ApiException) as caught:
        api.create_namespaced_pod_binding("b", "default", body("b", "n1"), _preload_content=False)
    assert caught.value.status == 409
    assert admin.get(NODES, "n1")["metadata"]["name"] == "n1"
