"""One agent joined to a real `kubenode apiserver`, with the static device plugin, shared by these tests:
registration and allocatable following the plugin, the node Lease, pods from the API running in their
cgroups with status in the API, kubectl delete, a crash loop, a mirror pod, bad pods, /metrics."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.manifests import write_manifest
from kubenode.cgroupsweep import V1_MOUNT
from kubenode.kubeclient import LEASES, NODES, PODS, KubeClient
from kubenode.kubeclient.timefmt import parse_time
from kubenode.nodeendpoints import STATUS_PORT_ANNOTATION
from tests.agent_cluster.support import (
    events_for,
    gone,
    joined_agent,
    phase_is,
    pod_body,
    pod_status,
    wait_until,
)

KUBECTL = Path(__file__).resolve().parents[2] / ".venv/bin/kubectl"


@pytest.fixture(scope="module")
def node(api: ApiServerProcess) -> Iterator[AgentProcess]:
    settings = {
        "nodeLabels": {"example.com/rack": "r1"},
        "registerWithTaints": ["example.com/dedicated=test:NoSchedule"],
        "systemReserved": {"cpu": "500m", "memory": "100Mi"},
        "kubeReserved": {"memory": "28Mi", "example.com/accel": "1"},
    }
    yield from joined_agent(api, plugin=True, settings=settings)


def _node(admin: KubeClient, agent: AgentProcess) -> dict[str, Any]:
    return admin.get(NODES, agent.node)


def _bytes(quantity: str) -> int:
    from kubenode.model.quantity import to_amount

    return to_amount("memory", quantity)


def _pod_cgroups(agent: AgentProcess, uid: str) -> list[str]:
    found = []
    for current, _dirs, _files in os.walk(V1_MOUNT / "cpu" / agent.root.strip("/")):
        if current.endswith(f"pod{uid}"):
            found.append(current)
    return found


def test_registration_and_allocatable_follow_the_device_plugin(node: AgentProcess, admin: KubeClient) -> None:
    registered = wait_until(lambda: _node(admin, node), 20, "the Node object")
    labels = registered["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == node.node
    assert labels["kubernetes.io/os"] == "linux" and labels["kubernetes.io/arch"]
    assert labels["example.com/rack"] == "r1"  # --node-labels
    assert registered["spec"]["taints"] == [
        {"key": "example.com/dedicated", "value": "test", "effect": "NoSchedule"}
    ]

    def status() -> Any:
        return _node(admin, node)["status"]

    def both_plugins() -> Any:
        s = status()
        allocatable = s.get("allocatable", {})
        return (
            s
            if (allocatable.get("example.com/dongle"), allocatable.get("example.com/accel")) == ("2", "3")
            else None
        )

    st = wait_until(both_plugins, 20, "the plugin's two resources")
    assert st["capacity"]["pods"] == "110" and int(st["capacity"]["cpu"]) >= 1
    assert {"cpu", "memory", "ephemeral-storage", "example.com/accel"} <= set(st["capacity"])
    assert st["capacity"]["example.com/accel"] == "4"  # capacity keeps what --kube-reserved takes
    # allocatable = capacity - system-reserved - kube-reserved
    cpu_capacity = int(st["capacity"]["cpu"]) * 1000
    assert st["allocatable"]["cpu"] == f"{cpu_capacity - 500}m"
    assert _bytes(st["capacity"]["memory"]) - _bytes(st["allocatable"]["memory"]) == 128 * 2**20
    conditions = {c["type"]: c for c in st["conditions"]}
    assert conditions["Ready"]["status"] == "True" and conditions["Ready"]["reason"] == "KubeletReady"
    for kind in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        assert conditions[kind]["status"] == "False"
    info = st["nodeInfo"]
    assert info["containerRuntimeVersion"].startswith("kubenode://") and info["kubeletVersion"].startswith(
        "v1."
    )
    assert info["bootID"] and info["machineID"] is not None
    # daemonEndpoints names the authenticated HTTPS endpoint; the plain status port is an annotation.
    assert st["daemonEndpoints"]["kubeletEndpoint"]["Port"] > 0
    annotations = _node(admin, node)["metadata"].get("annotations") or {}
    assert annotations[STATUS_PORT_ANNOTATION] == node.status_address.rsplit(":", 1)[1]
    assert any(a["type"] == "InternalIP" for a in st["addresses"])
    for reason in ("Starting", "NodeReady"):  # in namespace default: a Node is cluster-scoped
        (event,) = wait_until(
            functools.partial(events_for, admin, node.node, reason), 5, f"the {reason} event"
        )
        assert event["involvedObject"]["kind"] == "Node" and event["source"]["component"] == "kubelet"

    # An unhealthy device lowers allocatable only (how fast is benchmarks/agent_cluster_bench.py's business).
    node.set_unhealthy("dongle-0")
    st = wait_until(
        lambda: (s := status())["allocatable"]["example.com/dongle"] == "1" and s, 30, "allocatable 1"
    )
    assert st["capacity"]["example.com/dongle"] == "2"
    node.set_unhealthy()
    wait_until(lambda: status()["allocatable"]["example.com/dongle"] == "2", 5, "allocatable back to 2")

    # The plugin leaves: its devices are unhealthy until it comes back.
    node.stop_plugin()
    st = wait_until(
        lambda: (s := status())["allocatable"]["example.com/dongle"] == "0" and s, 5, "allocatable 0"
    )
    assert st["capacity"]["example.com/dongle"] == "2"
    node.start_plugin()
    wait_until(lambda: status()["allocatable"]["example.com/dongle"] == "2", 20, "the plugin to come back")
    assert "kubelet_device_plugin_registration_total" in node.metrics()


def test_node_lease_is_renewed(node: AgentProcess, admin: KubeClient) -> None:
    lease = wait_until(lambda: admin.get(LEASES, node.node, "kube-node-lease"), 20, "the node Lease")
    spec = lease["spec"]
    assert spec["holderIdentity"] == node.node and spec["leaseDurationSeconds"] == 40
    assert len(spec["renewTime"].split(".")[1]) == len("000000Z")  # MicroTime: six fractional digits
    first = parse_time(spec["renewTime"])
    wait_until(
        lambda: parse_time(admin.get(LEASES, node.node, "kube-node-lease")["spec"]["renewTime"]) > first,
        5,
        "a renewal",
    )
    owners = admin.get(LEASES, node.node, "kube-node-lease")["metadata"].get("ownerReferences") or []
    assert owners and owners[0]["kind"] == "Node" and owners[0]["name"] == node.node


def test_node_status_is_written_only_when_it_changes(node: AgentProcess, admin: KubeClient) -> None:
    # The status is computed every second here (nodeStatusUpdateFrequency 1) but sent only on change.
    wait_until(
        lambda: _node(admin, node)["status"]["allocatable"].get("example.com/dongle") == "2", 20, "settled"
    )
    version = _node(admin, node)["metadata"]["resourceVersion"]
    # Three Lease renewals: the Lease and the status are both on a 1 s period here, so the status was
    # computed meanwhile too, however slowly the machine runs (counted, not slept).
    renewals: list[str] = []

    def renewed_three_times() -> bool:
        renewed = admin.get(LEASES, node.node, "kube-node-lease")["spec"]["renewTime"]
        if renewed not in renewals:
            renewals.append(renewed)
        return len(renewals) > 3

    wait_until(renewed_three_times, 60, "three Lease renewals")
    assert _node(admin, node)["metadata"]["resourceVersion"] == version, (
        "an unchanged node status was written"
    )


def test_api_pod_runs_in_its_cgroup_with_status(node: AgentProcess, admin: KubeClient) -> None:
    body = pod_body(
        "web", node.node, resources={"limits": {"cpu": "250m", "memory": "64Mi", "example.com/dongle": "1"}}
    )
    uid = admin.create(PODS, body, "default")["metadata"]["uid"]
    status = wait_until(lambda: phase_is(admin, "web", "Running"), 20, "web Running in the API")
    assert status["qosClass"] == "Guaranteed" and status["hostIP"] and status["podIP"] and status["startTime"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
        "PodScheduled": "True",
    }
    (container,) = status["containerStatuses"]
    assert container["ready"] and container["started"] and container["restartCount"] == 0
    assert "startedAt" in container["state"]["running"]
    assert _pod_cgroups(node, uid), "no pod cgroup"
    events = wait_until(lambda: events_for(admin, "web", "Started"), 5, "the Started event")  # written async
    assert events[0]["source"] == {"component": "kubelet", "host": node.node}


def test_init_container_then_completion(node: AgentProcess, admin: KubeClient) -> None:
    body = pod_body("job", node.node, "exit 0", restart_policy="Never")
    body["spec"]["initContainers"] = [
        {"name": "init", "image": "busybox", "command": ["sh", "-c", "sleep 0.5"]}
    ]
    admin.create(PODS, body, "default")
    status = wait_until(lambda: phase_is(admin, "job", "Succeeded"), 20, "job Succeeded")
    conditions = {c["type"]: c for c in status["conditions"]}
    # The reasons of the earlier False states must not linger (the status is merged into the stored one).
    assert conditions["Initialized"]["status"] == "True" and "reason" not in conditions["Initialized"]
    assert conditions["Ready"]["status"] == "False" and conditions["Ready"]["reason"] == "PodCompleted"
    (init,) = status["initContainerStatuses"]
    assert init["ready"] and init["state"]["terminated"]["reason"] == "Completed"
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_kubectl_delete_stops_the_pod_and_removes_it(
    node: AgentProcess, admin: KubeClient, tmp_path: Path
) -> None:
    marker = tmp_path / "term"
    command = f"trap 'echo TERM > {marker}; exit 0' TERM; while true; do sleep 0.1; done"
    uid = admin.create(PODS, pod_body("stopme", node.node, command, grace=5), "default")["metadata"]["uid"]
    wait_until(lambda: phase_is(admin, "stopme", "Running"), 20, "stopme Running")
    wait_until(lambda: _pod_cgroups(node, uid), 5, "its cgroup")
    result = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(node.kubeconfig.parent / "admin.kubeconfig"),
         "delete", "pod", "stopme", "--timeout=30s"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert gone(admin, "stopme")
    assert marker.read_text().strip() == "TERM"
    assert not _pod_cgroups(node, uid)
    wait_until(lambda: events_for(admin, "stopme", "Killing"), 5, "the Killing event")


def test_forced_delete_kills_with_grace_zero(node: AgentProcess, admin: KubeClient) -> None:
    # The process ignores SIGTERM and its spec asks for an hour; a forced delete must not wait for it.
    command = "trap '' TERM; while true; do sleep 0.2; done"
    body = pod_body("stubborn", node.node, command, grace=3600)
    uid = admin.create(PODS, body, "default")["metadata"]["uid"]
    wait_until(lambda: phase_is(admin, "stubborn", "Running"), 20, "stubborn Running")
    wait_until(lambda: _pod_cgroups(node, uid), 5, "its cgroup")
    admin.delete(PODS, "stubborn", "default", grace_period_seconds=0)
    assert gone(admin, "stubborn")
    # Far less than the spec's hour, however loaded the machine: the kill did not wait for the grace.
    wait_until(lambda: not _pod_cgroups(node, uid), 120, "the pod cgroup removed")


def test_crash_loop_counts_restarts_and_backs_off(node: AgentProcess, admin: KubeClient) -> None:
    admin.create(PODS, pod_body("crasher", node.node, "exit 3"), "default")

    def restarted_twice() -> dict[str, object] | None:
        statuses = pod_status(admin, "crasher").get("containerStatuses") or []
        return statuses[0] if statuses and statuses[0]["restartCount"] >= 2 else None

    container = wait_until(restarted_twice, 20, "two restarts")
    assert container["lastState"]["terminated"]["exitCode"] == 3
    backoff = wait_until(lambda: events_for(admin, "crasher", "BackOff"), 10, "a BackOff event")
    assert backoff[0]["type"] == "Warning" and "crasher" in backoff[0]["message"]
    wait_until(
        lambda: events_for(admin, "crasher", "BackOff")[0]["count"] >= 2, 15, "the BackOff count to rise"
    )
    admin.delete(PODS, "crasher", "default", grace_period_seconds=1)
    wait_until(lambda: gone(admin, "crasher"), 20, "crasher deleted")


def test_container_that_cannot_start_gets_a_failed_event(node: AgentProcess, admin: KubeClient) -> None:
    body = pod_body("nostart", node.node, restart_policy="Never")
    body["spec"]["containers"][0]["command"] = ["/nonexistent/program"]
    admin.create(PODS, body, "default")
    status = wait_until(lambda: phase_is(admin, "nostart", "Failed"), 20, "nostart Failed")
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert terminated["reason"] == "StartError" and terminated["exitCode"] == 128
    events = wait_until(lambda: events_for(admin, "nostart", "Failed"), 10, "a Failed event")
    assert events[0]["type"] == "Warning" and "/nonexistent/program" in events[0]["message"]
    assert events[0]["involvedObject"]["fieldPath"] == "spec.containers{main}"


def test_manifest_pod_gets_a_mirror_pod(node: AgentProcess, admin: KubeClient) -> None:
    write_manifest(
        node.manifests,
        "static.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: static-web, namespace: default}
        spec:
          containers: [{name: main, image: busybox, command: [sleep, "600"]}]
        """,
    )
    mirror = wait_until(lambda: admin.get(PODS, "static-web", "default"), 20, "the mirror pod")
    meta = mirror["metadata"]
    assert "kubernetes.io/config.mirror" in meta["annotations"]
    assert meta["ownerReferences"][0]["kind"] == "Node" and meta["ownerReferences"][0]["name"] == node.node
    wait_until(lambda: phase_is(admin, "static-web", "Running"), 20, "the mirror pod's status Running")
    # Deleting a mirror pod does not stop its static pod: the agent makes a new mirror (as the kubelet does).
    admin.delete(PODS, "static-web", "default")
    uid = meta["uid"]
    wait_until(
        lambda: admin.get(PODS, "static-web", "default")["metadata"]["uid"] != uid, 20, "a new mirror pod"
    )
    status = wait_until(
        lambda: phase_is(admin, "static-web", "Running"), 20, "the new mirror's status Running"
    )
    assert status["containerStatuses"][0]["restartCount"] == 0
    (node.manifests / "static.yaml").unlink()
    wait_until(lambda: gone(admin, "static-web"), 20, "the mirror pod deleted with its manifest")


def test_bad_pod_fails_with_reason_and_others_keep_running(node: AgentProcess, admin: KubeClient) -> None:
    body = pod_body("wants-nothing", node.node, resources={"limits": {"example.com/nothing": "1"}})
    admin.create(PODS, body, "default")
    status = wait_until(lambda: phase_is(admin, "wants-nothing", "Failed"), 20, "wants-nothing Failed")
    assert status["reason"] == "OutOfexample.com/nothing"
    assert "example.com/nothing" in status["message"]
    events = wait_until(
        lambda: events_for(admin, "wants-nothing", "OutOfexample.com/nothing"), 10, "its event"
    )
    assert events[0]["type"] == "Warning"
    too_many = pod_body("too-many", node.node, resources={"limits": {"example.com/dongle": "5"}})
    admin.create(PODS, too_many, "default")
    status = wait_until(lambda: phase_is(admin, "too-many", "Failed"), 20, "too-many Failed")
    assert status["reason"] == "OutOfexample.com/dongle"
    assert phase_is(admin, "web", "Running"), "the other pod stopped"
    for name in ("wants-nothing", "too-many"):  # a refused pod that is deleted goes away too
        admin.delete(PODS, name, "default")
        wait_until(functools.partial(gone, admin, name), 10, f"{name} deleted")


def test_metrics_use_the_kubelet_names(node: AgentProcess) -> None:
    text = node.metrics()
    for name in (
        "kubelet_running_pods",
        'kubelet_running_containers{container_state="running"}',
        "kubelet_pod_start_duration_seconds_bucket",
        "kubelet_pod_worker_duration_seconds_bucket",
        f'kubelet_node_name{{node="{node.node}"}} 1.0',
        "kubelet_device_plugin_registration_total",
        "kubelet_device_plugin_alloc_duration_seconds_bucket",
    ):
        assert name in text, f"{name} missing from /metrics"


def test_the_official_client_reads_what_the_agent_wrote(node: AgentProcess, api: ApiServerProcess) -> None:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(api.kubeconfig))  # type: ignore[no-untyped-call]
    try:
        core: Any = client.CoreV1Api(api_client)  # its models type every field as optional
        read_node = core.read_node(node.node)
        assert read_node.status.daemon_endpoints.kubelet_endpoint.port > 0
        assert {c.type for c in read_node.status.conditions} >= {"Ready", "MemoryPressure"}
        assert read_node.status.conditions[0].last_heartbeat_time is not None
        coordination: Any = client.CoordinationV1Api(api_client)
        lease = coordination.read_namespaced_lease(node.node, "kube-node-lease")
        assert lease.spec.renew_time is not None and lease.spec.lease_duration_seconds == 40
        pod = core.read_namespaced_pod_status("web", "default")
        assert pod.status.phase == "Running" and pod.status.container_statuses[0].state.running.started_at
        events = core.list_namespaced_event("default", field_selector="involvedObject.name=web")
        assert any(e.reason == "Started" and e.count >= 1 for e in events.items)
    finally:
        api_client.close()
