"""Server-side Table printing: kube's columns and cell text for pods, nodes, events, leases, namespaces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apiserver.printers import to_table
from apiserver.resources import EVENTS, LEASES, NAMESPACES, NODES, PODS, ResourceInfo
from apiserver.tablecells import human_duration

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


def ts(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def table_of(resource: ResourceInfo, *objects: dict[str, Any]) -> dict[str, Any]:
    """The Table of `objects` at NOW, with includeObject left to its default (Metadata)."""
    return to_table(resource, list(objects), include_object="", resource_version="1", now=NOW)


def names(table: dict[str, Any]) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]


def wide(table: dict[str, Any]) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"] if c["priority"] == 1]


def test_human_duration_matches_apimachinery() -> None:
    cases = {0: "0s", 5: "5s", 119: "119s", 150: "2m30s", 600: "10m", 3 * 3600: "3h", 3 * 3600 + 60: "3h1m"}
    cases |= {10 * 3600: "10h", 50 * 3600: "2d2h", 9 * 86400: "9d", 800 * 86400: "2y70d", -5: "<invalid>"}
    for seconds, text in cases.items():
        assert human_duration(seconds) == text, seconds


def running_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "default",
            "creationTimestamp": ts(90),
            "labels": {"a": "b"},
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c1"}, {"name": "c2"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.5",
            "containerStatuses": [
                {
                    "name": "c1",
                    "ready": True,
                    "restartCount": 2,
                    "state": {"running": {}},
                    "lastState": {"terminated": {"exitCode": 1, "finishedAt": ts(300)}},
                },
                {
                    "name": "c2",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                },
            ],
        },
    }


def test_pod_rows() -> None:
    table = to_table(PODS, [running_pod()], include_object="", resource_version="7", now=NOW)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "7"}
    assert names(table) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert wide(table) == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    row = table["rows"][0]
    assert row["cells"] == [
        "web",
        "1/2",
        "CrashLoopBackOff",
        "2 (5m ago)",
        "90s",
        "10.0.0.5",
        "n1",
        "<none>",
        "<none>",
    ]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["labels"] == {"a": "b"}
    pending = {
        "metadata": {"name": "p", "creationTimestamp": ts(3)},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }
    assert to_table(PODS, [pending], include_object="None", resource_version="1", now=NOW)["rows"][0] == {
        "cells": ["p", "0/1", "Pending", "0", "3s", "<none>", "<none>", "<none>", "<none>"]
    }
    gated = pending | {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}  # fmt: skip
    assert table_of(PODS, gated)["rows"][0]["cells"][2] == "SchedulingGated"
    terminating = running_pod() | {"metadata": {"name": "t", "deletionTimestamp": ts(0)}}
    full = to_table(
        PODS, [terminating], include_object="Object", resource_version="1", continue_token="c", now=NOW
    )
    assert full["rows"][0]["cells"][2] == "Terminating" and full["rows"][0]["object"] is terminating
    assert full["metadata"]["continue"] == "c"


def test_node_rows() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "creationTimestamp": ts(7200),
            "labels": {"node-role.kubernetes.io/control-plane": ""},
        },
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.5"}],
            "nodeInfo": {
                "kubeletVersion": "v1.37.0",
                "osImage": "Debian",
                "kernelVersion": "6.1",
                "containerRuntimeVersion": "kubenode://0.1",
            },
        },
    }
    table = table_of(NODES, node)
    assert names(table) == ["Name", "Status", "Roles", "Age", "Version"]
    assert table["rows"][0]["cells"] == [
        "n1",
        "Ready,SchedulingDisabled",
        "control-plane",
        "120m",
        "v1.37.0",
        "192.168.1.5",
        "<none>",
        "Debian",
        "6.1",
        "kubenode://0.1",
    ]
    bare = table_of(NODES, {"metadata": {"name": "x"}})
    assert bare["rows"][0]["cells"][1:3] == ["Unknown", "<none>"]


def test_event_lease_namespace_rows() -> None:
    event = {
        "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{c1}"},
        "reason": "Started",
        "message": "Started container c1",
        "type": "Normal",
        "count": 3,
        "firstTimestamp": ts(600),
        "lastTimestamp": ts(30),
        "source": {"component": "kubelet", "host": "n1"},
    }
    table = table_of(EVENTS, event)
    assert names(table) == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert table["rows"][0]["cells"] == [
        "30s (x3 over 10m)",
        "Normal",
        "Started",
        "pod/web",
        "spec.containers{c1}",
        "kubelet, n1",
        "Started container c1",
        "10m",
        "3",
        "web.1",
    ]
    lease = {"metadata": {"name": "n1", "creationTimestamp": ts(60)}, "spec": {"holderIdentity": "n1"}}
    assert table_of(LEASES, lease)["rows"][0]["cells"] == ["n1", "n1", "60s"]
    ns = {"metadata": {"name": "default", "creationTimestamp": ts(1)}, "status": {"phase": "Active"}}
    table = table_of(NAMESPACES, ns)
    assert names(table) == ["Name", "Status", "Age"] and table["rows"][0]["cells"] == [
        "default",
        "Active",
        "1s",
    ]
