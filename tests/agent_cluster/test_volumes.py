"""Volumes and env from ConfigMaps and Secrets, end to end: the real kubectl, `kubenode apiserver` (the Node
authorizer lets the agent read only what its pods reference) and the agent as its node.

A pod reads a ConfigMap file, a Secret file and env from both; an edited ConfigMap reaches the running
pod; a memory-backed emptyDir over its sizeLimit; a missing key gives CreateContainerConfigError; a missing
ConfigMap gives FailedMount until it is created.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import KubeClient
from tests.agent_cluster.support import events_for, phase_is, pod_status, wait_until
from tests.apiserver.kubectl_support import Kubectl

SETTINGS = {"configMapAndSecretTtl": 0.5, "resyncInterval": 1.0}


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "kubectl-cache")


@pytest.fixture
def node(make_agent: Callable[..., AgentProcess]) -> Iterator[AgentProcess]:
    yield make_agent(settings=SETTINGS).start()


def _apply(kubectl: Kubectl, obj: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", stdin=json.dumps(obj))


def _pod(
    name: str, node: str, container: dict[str, Any], volumes: list[dict[str, Any]], **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", **container}],
            "volumes": volumes,
            **spec,
        },
    }


def _logs(node: AgentProcess, name: str) -> str:
    """The container's output, from the agent's log files (the agent's status port listens on loopback
    here while the Node names the host's address, so `kubectl logs` cannot reach it in these tests)."""
    logs = sorted((node.state / "logs").glob(f"default_{name}_*/main/*.log"))
    return logs[-1].read_text() if logs else ""


def test_a_pod_reads_configmap_and_secret_files_and_env_and_sees_an_edit(
    node: AgentProcess, admin: KubeClient, kubectl: Kubectl
) -> None:
    suffix = uuid.uuid4().hex[:6]
    cm, secret, pod = f"app-{suffix}", f"creds-{suffix}", f"reader-{suffix}"
    kubectl.run("create", "configmap", cm, "--from-literal=greeting=hello", "--from-literal=mode=fast")
    kubectl.run("create", "secret", "generic", secret, "--from-literal=password=s3cret")
    script = (
        'echo "env greeting=$GREETING password=$PASSWORD cfg_mode=$CFG_mode"; '
        'echo "file password=$(cat /secret/password)"; last=""; '
        "while true; do g=$(cat /config/greeting); "
        'if [ "$g" != "$last" ]; then echo "file greeting=$g"; last=$g; fi; sleep 0.2; done'
    )
    container = {
        "command": ["sh", "-c", script],
        "env": [
            {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "greeting"}}},
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}},
        ],
        "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": cm}}],
        "volumeMounts": [
            {"name": "config", "mountPath": "/config"},
            {"name": "secret", "mountPath": "/secret", "readOnly": True},
        ],
    }
    volumes = [
        {"name": "config", "configMap": {"name": cm}},
        {"name": "secret", "secret": {"secretName": secret}},
    ]
    _apply(kubectl, _pod(pod, node.node, container, volumes))
    wait_until(lambda: phase_is(admin, pod, "Running"), 30, "the pod Running")
    log = wait_until(lambda: "file greeting=hello" in _logs(node, pod) and _logs(node, pod), 20, "output")
    assert "env greeting=hello password=s3cret cfg_mode=fast" in log
    assert "file password=s3cret" in log

    kubectl.run("patch", "configmap", cm, "--type=merge", "-p", '{"data":{"greeting":"bye"}}')
    wait_until(lambda: "file greeting=bye" in _logs(node, pod), 30, "the edit inside the running pod")
    kubectl.run("delete", "pod", pod, "--wait=true", timeout=60)
    assert not list((node.state / "pods").glob("*/volumes")), "the pod's volumes were not removed"


def test_a_memory_empty_dir_over_its_size_limit(
    node: AgentProcess, admin: KubeClient, kubectl: Kubectl
) -> None:
    pod = f"mem-{uuid.uuid4().hex[:6]}"
    container = {
        "command": ["sh", "-c", "dd if=/dev/zero of=/cache/big bs=1024 count=2048; echo rc=$?; exit 1"],
        "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
    }
    volumes = [{"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]
    _apply(kubectl, _pod(pod, node.node, container, volumes, restartPolicy="Never"))
    wait_until(lambda: phase_is(admin, pod, "Failed"), 30, "the pod Failed")
    log = _logs(node, pod)
    assert "No space left on device" in log and "rc=1" in log


def test_a_missing_key_is_create_container_config_error_and_a_missing_configmap_failed_mount(
    node: AgentProcess, admin: KubeClient, kubectl: Kubectl
) -> None:
    suffix = uuid.uuid4().hex[:6]
    cm, keyless, unmounted = f"partial-{suffix}", f"keyless-{suffix}", f"unmounted-{suffix}"
    kubectl.run("create", "configmap", cm, "--from-literal=present=1")
    container = {
        "command": ["sleep", "600"],
        "env": [{"name": "WANTED", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "absent"}}}],
    }
    _apply(kubectl, _pod(keyless, node.node, container, []))

    def waiting() -> dict[str, Any] | None:
        statuses = pod_status(admin, keyless).get("containerStatuses") or [{}]
        state = statuses[0].get("state", {}).get("waiting", {})
        return state if state.get("reason") == "CreateContainerConfigError" else None

    state = wait_until(waiting, 30, "CreateContainerConfigError")
    assert state["message"] == f"couldn't find key absent in ConfigMap default/{cm}"
    shown = kubectl.run("get", "pod", keyless).stdout
    assert "CreateContainerConfigError" in shown
    failed = wait_until(lambda: events_for(admin, keyless, "Failed"), 20, "the Failed event")
    assert failed[0]["message"] == f"Error: couldn't find key absent in ConfigMap default/{cm}"

    missing = f"later-{suffix}"
    container = {"command": ["sleep", "600"], "volumeMounts": [{"name": "config", "mountPath": "/config"}]}
    _apply(
        kubectl, _pod(unmounted, node.node, container, [{"name": "config", "configMap": {"name": missing}}])
    )
    events = wait_until(lambda: events_for(admin, unmounted, "FailedMount"), 30, "the FailedMount event")
    assert events[0]["type"] == "Warning"
    assert (
        events[0]["message"]
        == f'MountVolume.SetUp failed for volume "config" : configmap "{missing}" not found'
    )
    kubectl.run("create", "configmap", missing, "--from-literal=k=v")
    wait_until(lambda: phase_is(admin, unmounted, "Running"), 60, "the pod Running once its ConfigMap exists")
