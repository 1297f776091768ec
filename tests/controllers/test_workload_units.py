"""The pure parts of the workload controllers: rollout arithmetic, template hashes, the work queue,
expectations, pod claiming and ranking, daemon pod eligibility, label selectors."""

from __future__ import annotations

import threading
from typing import Any

from controllers import deploymentutil as du
from controllers.daemonset import daemon_template, node_fit
from controllers.framework import WorkQueue
from controllers.pods import Expectations, claim, deletion_rank, is_available, owner_ref, pod_from_template
from kubenode.labelselector import matches, selector_problem, to_text


def deployment(replicas: int, surge: Any = "25%", unavailable: Any = "25%") -> dict[str, Any]:
    return {
        "spec": {
            "replicas": replicas,
            "strategy": {"rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
        }
    }


def rs(replicas: int, available: int = 0) -> dict[str, Any]:
    return {"spec": {"replicas": replicas}, "status": {"availableReplicas": available}}


def test_surge_rounds_up_and_unavailable_down_as_kube() -> None:
    assert du.surge_and_unavailable(deployment(10)) == (3, 2)
    assert du.surge_and_unavailable(deployment(3, 1, 0)) == (1, 0)
    assert du.surge_and_unavailable(deployment(3, 0, 0)) == (0, 1)  # kube: a rollout must progress
    assert du.surge_and_unavailable(deployment(1)) == (1, 0)


def test_new_replica_set_grows_within_max_surge() -> None:
    d = deployment(3, 1, 0)
    old = rs(3, 3)
    assert du.new_rs_replicas(d, [old], None) == 1  # 3 old + 1 new = replicas + maxSurge
    new = rs(1)
    assert du.new_rs_replicas(d, [old, new], new) == 1  # at the ceiling: no growth
    assert du.new_rs_replicas(deployment(50), [rs(2, 2)], rs(2, 2)) == 50  # a scale-up goes straight there


def test_template_hash_ignores_its_own_label_and_changes_with_the_template() -> None:
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    labelled = {**template, "metadata": {"labels": {"app": "a", du.HASH_LABEL: "zzz"}}}
    assert du.template_hash(template) == du.template_hash(labelled)
    assert du.same_template(template, labelled)
    other = {**template, "spec": {"containers": [{"name": "c", "image": "y"}]}}
    assert du.template_hash(other) != du.template_hash(template)
    assert du.template_hash(template, 1) != du.template_hash(template)
    assert set(du.template_hash(template)) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_conditions_keep_transition_time_for_the_same_status() -> None:
    status: dict[str, Any] = {}
    du.set_condition(status, du.condition("Progressing", "True", "NewReplicaSetCreated", "m", "t1"))
    du.set_condition(status, du.condition("Progressing", "True", "ReplicaSetUpdated", "m", "t2"))
    (only,) = status["conditions"]
    assert (only["reason"], only["lastTransitionTime"], only["lastUpdateTime"]) == (
        "ReplicaSetUpdated",
        "t1",
        "t2",
    )
    du.set_condition(status, du.condition("Progressing", "False", "ProgressDeadlineExceeded", "m", "t3"))
    assert status["conditions"][0]["lastTransitionTime"] == "t3"


def test_work_queue_never_hands_one_key_to_two_workers() -> None:
    queue = WorkQueue()
    queue.add("a")
    queue.add("a")
    assert len(queue) == 1
    assert queue.get() == "a"
    queue.add("a")  # changed while being worked on: worked on again after, not at once
    assert len(queue) == 0
    queue.done("a")
    assert queue.get() == "a"
    queue.done("a")
    got: list[str | None] = []
    worker = threading.Thread(target=lambda: got.append(queue.get()))
    worker.start()
    queue.shutdown()
    worker.join(5)
    assert got == [None]


def test_work_queue_delays_on_its_clock() -> None:
    now = [100.0]
    queue = WorkQueue(clock=lambda: now[0])
    queue.add_after("later", 5)
    queue.add("now")
    assert queue.get() == "now"
    now[0] = 105.0
    assert queue.get() == "later"


def test_expectations_hold_until_observed_or_expired() -> None:
    now = [0.0]
    expectations = Expectations(ttl=300, clock=lambda: now[0])
    assert expectations.satisfied("k")
    expectations.expect("k", 2, 1)
    expectations.created("k")
    expectations.deleted("k")
    assert not expectations.satisfied("k")
    expectations.created("k")
    assert expectations.satisfied("k")
    expectations.expect("k", 5, 0)
    now[0] = 301.0
    assert expectations.satisfied("k")


def owner() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "d", "uid": "u1"},
    }


def pod(name: str, labels: dict[str, str], ref_uid: str | None = None, **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if ref_uid:
        meta["ownerReferences"] = [{"uid": ref_uid, "controller": True, "kind": "ReplicaSet", "name": "web"}]
    return {"metadata": meta, "spec": {}, "status": status}


def test_claim_adopts_orphans_and_releases_strays() -> None:
    selector = {"matchLabels": {"app": "web"}}
    pods = [
        pod("mine", {"app": "web"}, "u1"),
        pod("orphan", {"app": "web"}),
        pod("stray", {"app": "other"}, "u1"),
        pod("theirs", {"app": "web"}, "u2"),
    ]
    owned, adopt, release = claim(owner(), selector, pods)
    assert [[p["metadata"]["name"] for p in group] for group in (owned, adopt, release)] == [
        ["mine"],
        ["orphan"],
        ["stray"],
    ]
    made = pod_from_template(owner(), {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}})
    assert made["metadata"]["generateName"] == "web-" and made["metadata"]["ownerReferences"] == [
        owner_ref(owner())
    ]


def test_scale_down_removes_unscheduled_pending_and_unready_first() -> None:
    ready = [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    running = pod("running", {}, phase="Running", conditions=ready)
    running["spec"]["nodeName"] = "n1"
    pending = pod("pending", {}, phase="Pending")
    pending["spec"]["nodeName"] = "n1"
    unscheduled = pod("unscheduled", {}, phase="Pending")
    ranked = sorted([running, pending, unscheduled], key=deletion_rank)
    assert [p["metadata"]["name"] for p in ranked] == ["unscheduled", "pending", "running"]
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    assert is_available(running, 10, start + 10) and not is_available(running, 10, start + 9)


def node(labels: dict[str, str], taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": labels},
            "spec": {"taints": taints or []}, "status": {}}  # fmt: skip


def test_daemon_pods_fit_by_selector_and_taints() -> None:
    ds = {
        "spec": {
            "template": {
                "spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "image": "i"}]}
            }
        }
    }
    template = daemon_template(ds)
    assert node_fit(template, node({"disk": "ssd"})) == (True, True)
    assert node_fit(template, node({"disk": "hdd"})) == (False, False)
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    assert node_fit(template, node({"disk": "ssd"}, [not_ready])) == (True, True)  # kube's daemon tolerations
    assert node_fit(template, node({"disk": "ssd"}, [{"key": "gpu", "effect": "NoSchedule"}])) == (
        False,
        True,
    )
    assert node_fit(template, node({"disk": "ssd"}, [{"key": "gpu", "effect": "NoExecute"}])) == (
        False,
        False,
    )


def test_label_selectors() -> None:
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
    }
    assert matches(selector, {"app": "web", "tier": "a"}) and not matches(selector, {"app": "web"})
    assert not matches(None, {"app": "web"}) and matches({}, {"app": "web"})
    assert to_text(selector) == "app=web,tier in (a,b)"
    assert "values set can't be empty" in selector_problem(
        {"matchExpressions": [{"key": "k", "operator": "In"}]}
    )
