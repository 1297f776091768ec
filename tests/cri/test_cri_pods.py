"""Pods with images through the real kubectl, the API server, the agent and a real containerd (CRI v1).

One API server, one containerd and one agent for the module (conftest.py); each test makes its own pods and
checks what containerd and the cgroups hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.container.downwardapi import HostInfo
from agent.container.podrecord import RecordStore
from agent.kuberuntime.cri.client import CRIClient
from agent.kuberuntime.cri.runtime import CRIRuntime
from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.containerd import ContainerdProcess
from harness.crikillcycles import listed
from harness.ociimage import BUSYBOX_IMAGE
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.kubeclient import NODES, PODS, KubeClient
from tests.agent_cluster.support import events_for, gone, pod_status, wait_until
from tests.apiserver.kubectl_support import Kubectl
from tests.deviceplugin.support import cpu_config

CPU_HIERARCHY = Path("/sys/fs/cgroup/cpu")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def runtime(containerd: ContainerdProcess) -> Iterator[CRIClient]:
    client = CRIClient.connect(containerd.endpoint)
    yield client
    client.close()


def apply(kubectl: Kubectl, tmp_path: Path, body: dict[str, Any]) -> None:
    path = tmp_path / f"{body['metadata']['name']}.json"
    path.write_text(json.dumps(body))
    kubectl.run("apply", "-f", str(path))


def delete(kubectl: Kubectl, admin: KubeClient, name: str) -> None:
    kubectl.run("delete", "pod", name, "--wait=false")
    wait_until(lambda: gone(admin, name), 60, f"{name} deleted")


def image_pod(name: str, node: str, command: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/sh", "-c", command],
                    **container,
                }
            ],
        },
    }


def running(admin: KubeClient, name: str) -> dict[str, Any] | None:
    status = pod_status(admin, name)
    statuses = status.get("containerStatuses") or []
    return (
        status
        if status.get("phase") == "Running" and statuses and "running" in statuses[0]["state"]
        else None
    )


def of_pod(runtime: CRIClient, uid: str) -> tuple[list[cri.PodSandbox], list[cri.Container]]:
    return listed(runtime, {"io.kubernetes.pod.uid": uid})


def pod_cgroup(agent: AgentProcess, uid: str) -> Path | None:
    found = list((CPU_HIERARCHY / agent.root.lstrip("/")).rglob(f"pod{uid}"))
    return found[0] if found else None


def test_image_pod_runs_logs_and_is_limited_then_leaves_nothing(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, runtime: CRIClient, tmp_path: Path
) -> None:
    body = image_pod(
        "cri-hello",
        agent.node,
        "echo hello from $(POD) in busybox; sleep 600",
        env=[{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        resources={"limits": {"cpu": "500m", "memory": "64Mi"}},
    )
    apply(kubectl, tmp_path, body)
    status = wait_until(lambda: running(admin, "cri-hello"), 60, "cri-hello Running")
    uid = admin.get(PODS, "cri-hello", "default")["metadata"]["uid"]
    assert status["podIP"] == status["hostIP"]
    logs = wait_until(
        lambda: "hello" in (out := kubectl.out("logs", "cri-hello")) and out,
        20,
        "kubectl logs shows the output",
    )
    assert logs == "hello from cri-hello in busybox\n"

    sandboxes, containers = of_pod(runtime, uid)
    assert len(sandboxes) == 1 and len(containers) == 1
    container = containers[0]
    # The IDs kube shows: the runtime's container ID and the image's.
    [shown] = pod_status(admin, "cri-hello")["containerStatuses"]
    assert shown["containerID"] == f"containerd://{container.id}"
    assert shown["imageID"] == container.image_ref and shown["imageID"].startswith("sha256:")
    assert container.labels["io.kubernetes.container.name"] == "main"
    assert container.labels["io.kubernetes.pod.name"] == "cri-hello"
    assert container.labels["io.kubernetes.pod.namespace"] == "default"
    # The container's cgroup lies under the pod cgroup, with the quota of its CPU limit.
    pod_dir = pod_cgroup(agent, uid)
    assert pod_dir is not None
    assert (pod_dir / container.id / "cpu.cfs_quota_us").read_text().strip() == "50000"
    memory = Path(str(pod_dir).replace("/cpu/", "/memory/")) / container.id / "memory.limit_in_bytes"
    assert memory.read_text().strip() == str(64 * 1024 * 1024)

    kubectl.run("delete", "pod", "cri-hello", "--wait=false")
    wait_until(lambda: gone(admin, "cri-hello"), 60, "cri-hello deleted")
    wait_until(lambda: of_pod(runtime, uid) == ([], []), 20, "nothing of the pod left in containerd")
    wait_until(lambda: pod_cgroup(agent, uid) is None, 20, "the pod cgroup removed")


def test_a_missing_image_ends_in_image_pull_backoff(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    body = image_pod("cri-missing", agent.node, "true")
    body["spec"]["containers"][0]["image"] = "127.0.0.1:1/kubenode/missing:v1"
    apply(kubectl, tmp_path, body)

    def waiting_reason(name: str) -> str | None:
        statuses = pod_status(admin, name).get("containerStatuses") or []
        return (statuses[0]["state"].get("waiting") or {}).get("reason") if statuses else None

    wait_until(lambda: waiting_reason("cri-missing") == "ErrImagePull", 60, "ErrImagePull")
    wait_until(lambda: waiting_reason("cri-missing") == "ImagePullBackOff", 30, "ImagePullBackOff")
    # The kubelet's events: Failed (the pull's error, then "Error: ErrImagePull") and BackOff.
    failed = wait_until(lambda: events_for(admin, "cri-missing", "Failed"), 20, "Failed events")
    messages = {e["message"] for e in failed}
    assert "Error: ErrImagePull" in messages
    assert any(m.startswith('Failed to pull image "127.0.0.1:1/kubenode/missing:v1": ') for m in messages)
    backoff = wait_until(lambda: events_for(admin, "cri-missing", "BackOff"), 20, "a BackOff event")
    assert backoff[0]["message"] == 'Back-off pulling image "127.0.0.1:1/kubenode/missing:v1"'
    # A reference kube cannot parse (an upper-case repository) waits with the kubelet's InvalidImageName.
    body = image_pod("cri-invalid", agent.node, "true")
    body["spec"]["containers"][0]["image"] = "Kubenode/BusyBox:1"
    apply(kubectl, tmp_path, body)
    wait_until(lambda: waiting_reason("cri-invalid") == "InvalidImageName", 60, "InvalidImageName")
    message = pod_status(admin, "cri-invalid")["containerStatuses"][0]["state"]["waiting"]["message"]
    assert message == (
        'Failed to apply default image tag "Kubenode/BusyBox:1": '
        'couldn\'t parse image name "Kubenode/BusyBox:1": invalid reference format'
    )
    for name in ("cri-missing", "cri-invalid"):
        delete(kubectl, admin, name)


def test_an_agent_sigkill_and_restart_leaves_one_container(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, runtime: CRIClient, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, image_pod("cri-adopt", agent.node, "sleep 600"))
    apply(kubectl, tmp_path, image_pod("cri-orphan", agent.node, "sleep 600"))
    wait_until(lambda: running(admin, "cri-adopt"), 60, "cri-adopt Running")
    wait_until(lambda: running(admin, "cri-orphan"), 60, "cri-orphan Running")
    uid = admin.get(PODS, "cri-adopt", "default")["metadata"]["uid"]
    orphan = admin.get(PODS, "cri-orphan", "default")["metadata"]["uid"]
    _, before = of_pod(runtime, uid)
    agent.kill()
    # Deleted while the agent is down: the restarted agent finds its sandbox and container and removes them.
    kubectl.run("delete", "pod", "cri-orphan", "--grace-period=0", "--force")
    agent.start()
    wait_until(lambda: of_pod(runtime, orphan) == ([], []), 30, "the orphan removed from containerd")
    wait_until(lambda: pod_cgroup(agent, orphan) is None, 20, "the orphan's pod cgroup removed")
    # The restarted agent reports the pod again (its status server answers with it) and started nothing new.
    wait_until(
        lambda: "adopted running container" in agent.log(), 30, "the restarted agent adopts the container"
    )
    wait_until(lambda: running(admin, "cri-adopt"), 30, "cri-adopt still Running")
    sandboxes, after = of_pod(runtime, uid)
    assert [c.id for c in after] == [c.id for c in before]
    assert len(sandboxes) == 1
    assert pod_status(admin, "cri-adopt")["containerStatuses"][0]["restartCount"] == 0
    kubectl.run("delete", "pod", "cri-adopt", "--wait=false")
    wait_until(lambda: gone(admin, "cri-adopt"), 60, "cri-adopt deleted")
    wait_until(lambda: of_pod(runtime, uid) == ([], []), 20, "nothing of the pod left in containerd")


def test_a_crashing_container_restarts_and_keeps_its_previous_log(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, runtime: CRIClient, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, image_pod("cri-crash", agent.node, "echo run $RANDOM; exit 3"))

    def restarted() -> dict[str, Any] | None:
        statuses = pod_status(admin, "cri-crash").get("containerStatuses") or []
        return statuses[0] if statuses and statuses[0]["restartCount"] >= 1 else None

    status = wait_until(restarted, 60, "cri-crash restarted")
    assert status["lastState"]["terminated"]["exitCode"] == 3
    previous = kubectl.out("logs", "cri-crash", "--previous")
    assert previous.startswith("run ")
    uid = admin.get(PODS, "cri-crash", "default")["metadata"]["uid"]
    # The kubelet's container GC: at most the running (or newest) one and one dead copy per container.
    assert len(of_pod(runtime, uid)[1]) <= 2
    kubectl.run("delete", "pod", "cri-crash", "--wait=false")
    wait_until(lambda: gone(admin, "cri-crash"), 60, "cri-crash deleted")
    wait_until(lambda: of_pod(runtime, uid) == ([], []), 20, "nothing of the pod left in containerd")


def test_the_process_handler_runs_host_processes_and_the_node_reports_the_runtime(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, runtime: CRIClient, tmp_path: Path
) -> None:
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "host-processes"},
        "handler": "kubenode-process",
    }
    apply(kubectl, tmp_path, runtime_class)
    body = image_pod("cri-process", agent.node, "echo on the host; sleep 600")
    body["spec"]["runtimeClassName"] = "host-processes"
    apply(kubectl, tmp_path, body)
    wait_until(lambda: running(admin, "cri-process"), 60, "cri-process Running")
    uid = admin.get(PODS, "cri-process", "default")["metadata"]["uid"]
    assert of_pod(runtime, uid) == ([], [])  # a host process: containerd knows nothing of it
    node = kubectl.out("get", "node", agent.node, "-o", "json")
    status = json.loads(node)["status"]
    assert status["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.6")
    assert any(BUSYBOX_IMAGE in image["names"] for image in status.get("images") or [])
    kubectl.run("delete", "pod", "cri-process", "--wait=false")
    wait_until(lambda: gone(admin, "cri-process"), 60, "cri-process deleted")


def test_a_runtime_that_goes_away_shows_in_status_and_is_used_again_when_back(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, containerd: ContainerdProcess, tmp_path: Path
) -> None:
    containerd.stop()
    try:
        apply(kubectl, tmp_path, image_pod("cri-away", agent.node, "sleep 600"))

        def says_so() -> str:
            status = pod_status(admin, "cri-away")
            return str(status.get("message") or "") if status.get("reason") == "SyncError" else ""

        message = wait_until(says_so, 60, "the pod's status names the runtime")
        assert f"container runtime {containerd.endpoint}" in message and "UNAVAILABLE" in message
    finally:
        containerd.start(import_images=False)
    wait_until(lambda: running(admin, "cri-away"), 90, "cri-away Running once containerd is back")
    kubectl.run("delete", "pod", "cri-away", "--wait=false")
    wait_until(lambda: gone(admin, "cri-away"), 60, "cri-away deleted")


def test_an_endpoint_that_is_not_there_is_one_error_and_process_pods_still_run(
    api: ApiServerProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    endpoint = f"unix://{tmp_path}/no-runtime.sock"
    lonely = AgentProcess(api.kubeconfig, settings={"containerRuntimeEndpoint": endpoint})
    lonely.kubeconfig = api.kubeconfig_for(f"system:node:{lonely.node}", ["system:nodes"])
    try:
        lonely.start()
        errors = [line for line in lonely.log().splitlines() if " ERROR " in line]
        assert (
            len(errors) == 1
            and f"container runtime endpoint {endpoint}: rpc error: code = UNAVAILABLE" in errors[0]
        )
        apply(
            kubectl,
            tmp_path,
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "host-processes"},
                "handler": "kubenode-process",
            },
        )
        on_host = image_pod("lonely-process", lonely.node, "sleep 600")
        on_host["spec"]["runtimeClassName"] = "host-processes"
        apply(kubectl, tmp_path, on_host)
        apply(kubectl, tmp_path, image_pod("lonely-image", lonely.node, "sleep 600"))
        wait_until(lambda: running(admin, "lonely-process"), 60, "the process pod Running")
        status = wait_until(
            lambda: (s := pod_status(admin, "lonely-image")).get("reason") == "SyncError" and s,
            60,
            "the image pod's status names the runtime",
        )
        assert f"container runtime {endpoint}" in status["message"]
        for name in ("lonely-process", "lonely-image"):
            delete(kubectl, admin, name)
    finally:
        leaks = lonely.close()
    assert not leaks, f"cgroups left behind: {leaks}"


def test_the_security_context_reaches_the_container(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    body = image_pod(
        "cri-secure",
        agent.node,
        "id -u; id -g; id -G; touch /written 2>/dev/null || echo read-only; sleep 600",
        securityContext={"runAsUser": 65534, "runAsGroup": 65534, "readOnlyRootFilesystem": True},
    )
    body["spec"]["securityContext"] = {
        "supplementalGroups": [4242],
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    apply(kubectl, tmp_path, body)
    wait_until(lambda: running(admin, "cri-secure"), 60, "cri-secure Running")
    logs = wait_until(
        lambda: "read-only" in (out := kubectl.out("logs", "cri-secure")) and out,
        20,
        "the container's output",
    )
    uid, gid, groups, written = logs.splitlines()
    assert (uid, gid, written) == ("65534", "65534", "read-only")
    assert "4242" in groups.split()
    delete(kubectl, admin, "cri-secure")


def test_device_plugin_devices_env_and_the_cpuset_reach_the_container(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, runtime: CRIClient, tmp_path: Path
) -> None:
    body = image_pod(
        "cri-dongle",
        agent.node,
        "echo serial=$DONGLE_SERIAL; ls /dev | grep dongle; sleep 600",
        resources={"limits": {"example.com/dongle": "1"}},
    )
    wait_until(
        lambda: admin.get(NODES, agent.node)["status"]["allocatable"].get("example.com/dongle") == "2",
        30,
        "the plugin's dongles on the Node",
    )
    apply(kubectl, tmp_path, body)
    wait_until(lambda: running(admin, "cri-dongle"), 60, "cri-dongle Running")
    logs = wait_until(
        lambda: "dongle" in (out := kubectl.out("logs", "cri-dongle")).split("\n", 1)[-1] and out,
        20,
        "the container's output",
    )
    serial, device = logs.splitlines()[:2]
    assert (serial, device) in (("serial=A0", "dongle0"), ("serial=A1", "dongle1"))
    # The container's cpuset is the one the agent gave the pod (the shared pool here).
    uid = admin.get(PODS, "cri-dongle", "default")["metadata"]["uid"]
    [container] = of_pod(runtime, uid)[1]
    pod_dir = pod_cgroup(agent, uid)
    assert pod_dir is not None
    cpuset_dir = Path(str(pod_dir).replace("/cpu/", "/cpuset/"))
    pod_cpus = (cpuset_dir / "cpuset.cpus").read_text().strip()
    assert (cpuset_dir / container.id / "cpuset.cpus").read_text().strip() == pod_cpus
    delete(kubectl, admin, "cri-dongle")


def test_exec_sync_passes_the_exit_code_and_output(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, containerd: ContainerdProcess, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, image_pod("cri-exec", agent.node, "sleep 600"))
    wait_until(lambda: running(admin, "cri-exec"), 60, "cri-exec Running")
    uid = admin.get(PODS, "cri-exec", "default")["metadata"]["uid"]
    # The runtime as the prober uses it; any instance finds the container by its labels.
    runtime = CRIRuntime(
        containerd.endpoint,
        RecordStore(tmp_path / "state"),
        HostInfo(agent.node),
        node=agent.node,
        log_root=tmp_path / "logs",
    )
    code, out, err = runtime.exec_sync(uid, "main", ["/bin/sh", "-c", "echo out; echo err >&2; exit 7"], 5)
    assert (code, out, err) == (7, b"out\n", b"err\n")
    with pytest.raises(LookupError, match="container sidecar of pod"):
        runtime.exec_sync(uid, "sidecar", ["true"], 5)
    delete(kubectl, admin, "cri-exec")


def test_a_configmap_volume_is_visible_inside_the_container(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cri-settings", "namespace": "default"},
        "data": {"greeting": "hello from a ConfigMap"},
    }
    apply(kubectl, tmp_path, config_map)
    body = image_pod(
        "cri-volume",
        agent.node,
        "cat /etc/settings/greeting; echo; sleep 600",
        volumeMounts=[{"name": "settings", "mountPath": "/etc/settings", "readOnly": True}],
    )
    body["spec"]["volumes"] = [{"name": "settings", "configMap": {"name": "cri-settings"}}]
    apply(kubectl, tmp_path, body)
    wait_until(lambda: running(admin, "cri-volume"), 60, "cri-volume Running")
    logs = wait_until(
        lambda: "ConfigMap" in (out := kubectl.out("logs", "cri-volume")) and out,
        20,
        "the container's output",
    )
    assert logs == "hello from a ConfigMap\n"
    delete(kubectl, admin, "cri-volume")


def test_a_kubenode_cpu_pod_is_pinned_to_exactly_its_set(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, runtime: CRIClient, tmp_path: Path
) -> None:
    # The CPU plugin beside the agent's static one: every CPU of the machine as a kubenode.io/cpu device.
    plugin = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "deviceplugin", "--config", str(cpu_config(tmp_path)),
         "--kubelet-dir", str(agent.plugin_dir)],
        cwd=REPO,
        env=agent.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(
            lambda: admin.get(NODES, agent.node)["status"]["allocatable"].get("kubenode.io/cpu"),
            30,
            "kubenode.io/cpu on the Node",
        )
        body = image_pod(
            "cri-pinned",
            agent.node,
            "echo cpus=$KUBENODE_CPUSET; sleep 600",
            resources={"limits": {"kubenode.io/cpu": "1"}},
        )
        apply(kubectl, tmp_path, body)
        wait_until(lambda: running(admin, "cri-pinned"), 60, "cri-pinned Running")
        logs = wait_until(
            lambda: "cpus=" in (out := kubectl.out("logs", "cri-pinned")) and out,
            20,
            "the container's output",
        )
        granted = logs.strip().removeprefix("cpus=")
        assert granted.isdigit(), logs  # one CPU
        uid = admin.get(PODS, "cri-pinned", "default")["metadata"]["uid"]
        [container] = of_pod(runtime, uid)[1]
        pod_dir = pod_cgroup(agent, uid)
        assert pod_dir is not None
        cpuset_dir = Path(str(pod_dir).replace("/cpu/", "/cpuset/"))
        assert (cpuset_dir / container.id / "cpuset.cpus").read_text().strip() == granted
        delete(kubectl, admin, "cri-pinned")
    finally:
        plugin.terminate()
        plugin.wait(10)


def test_a_failing_exec_liveness_probe_restarts_the_container(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    # ExecSync runs the probe inside the container: the file exists only there.
    probe = {"exec": {"command": ["/bin/sh", "-c", "test ! -e /tmp/unhealthy"]}, "periodSeconds": 1}
    body = image_pod(
        "cri-liveness", agent.node, "sleep 2; touch /tmp/unhealthy; sleep 600", livenessProbe=probe
    )
    apply(kubectl, tmp_path, body)

    def restarted() -> dict[str, Any] | None:
        statuses = pod_status(admin, "cri-liveness").get("containerStatuses") or []
        return statuses[0] if statuses and statuses[0]["restartCount"] >= 1 else None

    wait_until(restarted, 90, "the container restarted by its liveness probe")
    killing = wait_until(lambda: events_for(admin, "cri-liveness", "Killing"), 20, "a Killing event")
    assert "failed liveness probe" in killing[0]["message"]
    delete(kubectl, admin, "cri-liveness")
