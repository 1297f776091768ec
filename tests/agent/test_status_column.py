"""`agent status` shows kubectl's STATUS (printPod's order of reasons), not just the phase."""

from __future__ import annotations

from typing import Any

import pytest

from agent.status.statustable import kubectl_status


def _pod(
    phase: str = "Running",
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    **status: Any,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "status": {
            "phase": phase,
            "containerStatuses": containers or [],
            "initContainerStatuses": init or [],
            **status,
        },
    }


def _c(state: dict[str, Any], ready: bool = False, name: str = "c", started: bool = False) -> dict[str, Any]:
    return {"name": name, "state": state, "ready": ready, "started": started}


RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (_pod(containers=[_c(RUNNING, ready=True)]), "Running"),
        (_pod("Pending", [_c({"waiting": {"reason": "ContainerCreating"}})]), "ContainerCreating"),
        (_pod(containers=[_c({"waiting": {"reason": "CrashLoopBackOff"}})]), "CrashLoopBackOff"),
        (_pod("Pending", [_c({"waiting": {"reason": "ImageNotSupported"}})]), "ImageNotSupported"),
        (_pod("Succeeded", [_c({"terminated": {"exitCode": 0, "reason": "Completed"}})]), "Completed"),
        (_pod("Failed", [_c({"terminated": {"exitCode": 3}})]), "ExitCode:3"),
        (_pod("Failed", reason="OutOfcpu"), "OutOfcpu"),
        (
            _pod(
                containers=[
                    _c({"terminated": {"exitCode": 0, "reason": "Completed"}}, name="a"),
                    _c(RUNNING, ready=True, name="b"),
                ]
            ),
            "Running",
        ),
        (
            _pod(
                "Pending",
                [_c({"waiting": {"reason": "PodInitializing"}})],
                [_c({"terminated": {"exitCode": 0}}, name="i0"), _c(RUNNING, name="i1")],
            ),
            "Init:1/2",
        ),
        (
            _pod("Pending", init=[_c({"waiting": {"reason": "CrashLoopBackOff"}}, name="i0")]),
            "Init:CrashLoopBackOff",
        ),
        (_pod("Pending", init=[_c({"terminated": {"exitCode": 2}}, name="i0")]), "Init:ExitCode:2"),
    ],
)
def test_status_column_follows_kubectl(pod: dict[str, Any], expected: str) -> None:
    assert kubectl_status(pod) == expected


def test_a_started_sidecar_does_not_hold_the_pod_in_init() -> None:
    pod = _pod(
        containers=[_c(RUNNING, ready=True)], init=[_c(RUNNING, ready=True, name="side", started=True)]
    )
    assert kubectl_status(pod) == "Init:0/1"  # without the spec it is an ordinary init container
    pod["spec"] = {"initContainers": [{"name": "side", "restartPolicy": "Always"}]}
    assert kubectl_status(pod) == "Running"


def test_a_live_pod_being_deleted_is_terminating() -> None:
    pod = _pod(containers=[_c(RUNNING, ready=True)])
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert kubectl_status(pod) == "Terminating"
