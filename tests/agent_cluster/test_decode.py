"""Decoding pods from the API server: fields newer than the model are ignored (as the kubelet's Go decoding
drops them), real problems are reported with their field, status-only changes compare equal."""

from __future__ import annotations

from typing import Any

from agent.config.apisource import decode_api_pod


def _pod(**extra: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "command": ["sleep", "1"], **extra.pop("container", {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1", **extra.pop("metadata", {})},
        "spec": {"nodeName": "n1", "containers": [container], **extra.pop("spec", {})},
        "status": extra.pop("status", {}),
    }


def test_fields_newer_than_the_model_are_ignored() -> None:
    obj = _pod(metadata={"futureMeta": "x"}, spec={"futureSpec": True}, container={"futureField": {"a": 1}})
    decoded = decode_api_pod(obj)
    assert decoded.error is None and decoded.pod is not None
    assert decoded.pod.containers[0].command == ("sleep", "1")
    assert decoded.pod.raw is obj  # the object as the server sent it


def test_a_real_problem_names_its_field() -> None:
    decoded = decode_api_pod(_pod(container={"resources": {"limits": {"cpu": "lots"}}}))
    assert decoded.pod is None and decoded.error is not None
    assert decoded.error.field == "spec.containers[0].resources.limits.cpu"


def test_status_only_changes_compare_equal_but_a_terminal_phase_does_not() -> None:
    pending = decode_api_pod(_pod()).pod
    running = decode_api_pod(_pod(status={"phase": "Running", "startTime": "2026-01-01T00:00:00Z"})).pod
    failed = decode_api_pod(_pod(status={"phase": "Failed"})).pod
    assert pending == running
    assert failed is not None and failed.phase == "Failed" and failed != pending


def test_mirror_pods_are_recognised() -> None:
    decoded = decode_api_pod(_pod(metadata={"annotations": {"kubernetes.io/config.mirror": "abc"}}))
    assert decoded.mirror
