"""The workload controllers on a cluster of real processes, driven by the real kubectl.

One API server, the scheduler, two agents (a third joins for the DaemonSet) and `kubenode
controller-manager`: a Deployment created, scaled, a deleted replica replaced, rolled out with
`kubectl set image` under maxUnavailable 0 without the Ready count ever dipping (sampled), rolled back
with `kubectl rollout undo`; a Job that completes and one that fails past its backoff limit (`kubectl
wait`); a DaemonSet pod on every agent and on one that joins; each deletion propagation policy; the
default ServiceAccount of a new namespace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from controllers.pods import is_ready
from controllers.resources import REPLICASETS, SERVICEACCOUNTS
from harness.apiserver import ApiServerProcess
from tests.agent.support import require_cgroup_v1
from tests.controllers.cluster import Cluster, Sampler, wait_for

ROLLOUT_TIMEOUT = "120s"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    require_cgroup_v1()
    with ApiServerProcess() as api:
        made = Cluster(api)
        try:
            made.add_agent()
            made.add_agent()
            yield made
        finally:
            leftovers = made.close()
            assert not leftovers, f"cgroups left behind: {leftovers}"


def deployment(
    name: str, replicas: int, *, max_unavailable: int | str = "25%", max_surge: int | str = "25%"
) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "strategy": {"rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": max_surge}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "600"]}]}},
        },
    })  # fmt: skip


def live_ready(cluster: Cluster, app: str) -> list[dict[str, Any]]:
    return [
        p for p in cluster.pods(f"app={app}") if is_ready(p) and not p["metadata"].get("deletionTimestamp")
    ]


def test_deployment_create_scale_replace_delete(cluster: Cluster) -> None:
    cluster.out("create", "deployment", "web", "--image=busybox", "--replicas=2", "--", "sleep", "600")
    cluster.out("rollout", "status", "deploy/web", f"--timeout={ROLLOUT_TIMEOUT}")
    assert len(live_ready(cluster, "web")) == 2
    scaled = cluster.out(
        "get", "events", "--field-selector", "involvedObject.name=web,reason=ScalingReplicaSet"
    )
    assert "Scaled up replica set web-" in scaled and "from 0 to 2" in scaled
    cluster.out("scale", "deploy/web", "--replicas=4")
    cluster.out("rollout", "status", "deploy/web", f"--timeout={ROLLOUT_TIMEOUT}")
    pods = live_ready(cluster, "web")
    assert len(pods) == 4 and len({p["spec"]["nodeName"] for p in pods}) == 2  # spread over both agents
    victim = pods[0]["metadata"]["name"]
    cluster.out("delete", "pod", victim, "--grace-period=1")
    wait_for(lambda: len(live_ready(cluster, "web")) == 4 and victim not in {p["metadata"]["name"] for p in
             cluster.pods("app=web")}, 60, "the deleted replica replaced")  # fmt: skip
    assert len(cluster.pods("app=web")) == 4
    cluster.out("delete", "deploy", "web", "--timeout=60s")
    wait_for(lambda: not cluster.pods("app=web"), 60, "the Deployment's pods gone")


def test_set_image_never_dips_below_ready_and_undo(cluster: Cluster) -> None:
    cluster.out("apply", "-f", "-", stdin=deployment("roll", 3, max_unavailable=0, max_surge=1))
    cluster.out("rollout", "status", "deploy/roll", f"--timeout={ROLLOUT_TIMEOUT}")
    with Sampler(lambda: len(live_ready(cluster, "roll"))) as ready:
        cluster.out("set", "image", "deploy/roll", "main=busybox:1.36")
        cluster.out("rollout", "status", "deploy/roll", f"--timeout={ROLLOUT_TIMEOUT}")
    assert len(ready.values) >= 3 and min(ready.values) >= 3, ready.values
    replica_sets = cluster.client.list(REPLICASETS, "default", label_selector="app=roll")["items"]
    revisions = sorted(
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for rs in replica_sets
    )
    assert revisions == ["1", "2"]
    history = cluster.out("rollout", "history", "deploy/roll")
    assert [line.split()[0] for line in history.strip().split("\n")[2:]] == ["1", "2"]
    cluster.out("rollout", "undo", "deploy/roll")
    cluster.out("rollout", "status", "deploy/roll", f"--timeout={ROLLOUT_TIMEOUT}")
    pods = live_ready(cluster, "roll")
    assert len(pods) == 3 and {p["spec"]["containers"][0]["image"] for p in pods} == {"busybox"}
    current = json.loads(cluster.out("get", "deploy", "roll", "-o", "json"))
    assert current["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    conditions = {c["type"]: c["reason"] for c in current["status"]["conditions"]}
    assert conditions == {"Available": "MinimumReplicasAvailable", "Progressing": "NewReplicaSetAvailable"}
    cluster.out("delete", "deploy", "roll")


def test_jobs_complete_and_fail_past_backoff_limit(cluster: Cluster) -> None:
    cluster.out("create", "job", "ok", "--image=busybox", "--", "/bin/sh", "-c", "exit 0")
    cluster.out("wait", "--for=condition=complete", "job/ok", "--timeout=90s")
    assert cluster.out("get", "job", "ok").split("\n")[1].split()[:3] == ["ok", "Complete", "1/1"]
    failing = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bad"},
        "spec": {"backoffLimit": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox", "command": ["/bin/sh", "-c", "exit 3"]}]}}},
    }  # fmt: skip
    cluster.out("apply", "-f", "-", stdin=json.dumps(failing))
    cluster.out("wait", "--for=condition=failed", "job/bad", "--timeout=90s")
    job = json.loads(cluster.out("get", "job", "bad", "-o", "json"))
    assert (job["status"]["failed"] == 2 and "active" not in job["status"]) or job["status"]["active"] == 0
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    pods = cluster.pods("batch.kubernetes.io/job-name=bad")
    assert len(pods) == 2 and {p["status"]["phase"] for p in pods} == {"Failed"}
    cluster.out("delete", "job", "ok", "bad")
    wait_for(lambda: not cluster.pods("batch.kubernetes.io/job-name in (ok,bad)"), 60, "the Jobs' pods gone")


def test_delete_with_each_propagation_policy(cluster: Cluster) -> None:
    for name in ("orphaned", "fg", "bg"):
        cluster.out("apply", "-f", "-", stdin=deployment(name, 2))
        cluster.out("rollout", "status", f"deploy/{name}", f"--timeout={ROLLOUT_TIMEOUT}")
    cluster.out("delete", "deploy", "orphaned", "--cascade=orphan")
    replica_sets = cluster.client.list(REPLICASETS, "default", label_selector="app=orphaned")["items"]
    assert len(replica_sets) == 1 and not replica_sets[0]["metadata"].get("ownerReferences")
    assert len(cluster.pods("app=orphaned")) == 2
    cluster.out("delete", "deploy", "fg", "--cascade=foreground", "--timeout=90s")  # returns once it is gone
    assert not cluster.client.list(REPLICASETS, "default", label_selector="app=fg")["items"]
    assert all(p["metadata"].get("deletionTimestamp") for p in cluster.pods("app=fg"))
    cluster.out("delete", "deploy", "bg", "--cascade=background")
    wait_for(lambda: not cluster.pods("app=bg") and not cluster.client.list(
        REPLICASETS, "default", label_selector="app=bg")["items"], 60, "background deletion")  # fmt: skip
    cluster.out("delete", "rs", "-l", "app=orphaned")
    wait_for(lambda: not cluster.pods("app=orphaned") and not cluster.pods("app=fg"), 60, "pods gone")


def test_default_service_account_in_a_new_namespace(cluster: Cluster) -> None:
    cluster.out("create", "namespace", "team-a")
    account = wait_for(lambda: cluster.client.list(SERVICEACCOUNTS, "team-a")["items"], 30, "default SA")
    assert [a["metadata"]["name"] for a in account] == ["default"]
    cluster.out("delete", "serviceaccount", "default", "-n", "team-a")
    wait_for(lambda: cluster.client.list(SERVICEACCOUNTS, "team-a")["items"], 30, "default SA made again")


def test_daemonset_on_every_agent_and_one_that_joins(cluster: Cluster) -> None:
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "everywhere"},
        "spec": {"selector": {"matchLabels": {"app": "everywhere"}}, "template": {
            "metadata": {"labels": {"app": "everywhere"}},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "600"]}]}}},
    }  # fmt: skip
    cluster.out("apply", "-f", "-", stdin=json.dumps(daemonset))
    cluster.out("rollout", "status", "ds/everywhere", f"--timeout={ROLLOUT_TIMEOUT}")
    nodes = {a.node for a in cluster.agents}
    assert {p["spec"]["nodeName"] for p in live_ready(cluster, "everywhere")} == nodes
    joined = cluster.add_agent()

    def daemon_nodes() -> set[str]:
        return {p["spec"]["nodeName"] for p in live_ready(cluster, "everywhere")}

    wait_for(lambda: daemon_nodes() == {*nodes, joined.node}, 90, "a daemon pod on the joining agent")
    victim = next(p for p in live_ready(cluster, "everywhere") if p["spec"]["nodeName"] == joined.node)
    cluster.out("delete", "pod", victim["metadata"]["name"])

    def replaced() -> bool:
        pods = live_ready(cluster, "everywhere")
        return any(
            p["spec"]["nodeName"] == joined.node and p["metadata"]["uid"] != victim["metadata"]["uid"]
            for p in pods
        )

    wait_for(replaced, 60, "the daemon pod made again")
    assert len(live_ready(cluster, "everywhere")) == 3
    cluster.out("delete", "ds", "everywhere")
    wait_for(lambda: not cluster.pods("app=everywhere"), 60, "the daemon pods gone")
