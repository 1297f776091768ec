"""Smoke test: the official Python client against the real server process (create, get, list,
patch, watch resuming from a resourceVersion, delete)."""

from __future__ import annotations

from typing import Any

from kubernetes import watch

from harness.apiserver import ApiServerProcess


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "smoke"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
            ]
        },
    }


def test_default_namespaces_exist(core: Any) -> None:
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_create_get_patch_watch_resume_delete(core: Any) -> None:
    created = core.create_namespaced_pod("default", _pod("smoke-1"))
    assert created.status.phase == "Pending"
    assert created.status.qos_class == "Guaranteed"
    assert created.metadata.generation == 1
    assert created.spec.restart_policy == "Always"
    start_rv = created.metadata.resource_version

    core.patch_namespaced_pod("smoke-1", "default", {"metadata": {"labels": {"step": "two"}}})
    core.create_namespaced_pod("default", _pod("smoke-2"))

    # A watch from the create's resourceVersion sees exactly what came after it, in order.
    seen = []
    stream = watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(  # type: ignore[no-untyped-call]
        core.list_namespaced_pod, "default", resource_version=start_rv, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            stream.stop()  # type: ignore[no-untyped-call]
    assert seen == [("MODIFIED", "smoke-1"), ("ADDED", "smoke-2")]

    got = core.read_namespaced_pod("smoke-1", "default")
    assert got.metadata.labels == {"app": "smoke", "step": "two"}
    listed = core.list_namespaced_pod("default", label_selector="step=two")
    assert [p.metadata.name for p in listed.items] == ["smoke-1"]

    for name in ("smoke-1", "smoke-2"):
        core.delete_namespaced_pod(name, "default")  # unbound: removed at once
    assert core.list_namespaced_pod("default", label_selector="app=smoke").items == []


def test_health_endpoints_need_no_token(api: ApiServerProcess) -> None:
    import urllib.request

    for path in ("/healthz", "/livez", "/readyz"):
        with urllib.request.urlopen(api.url + path, context=api.ssl_context(), timeout=5) as response:
            assert response.read() == b"ok"
