"""`/metrics` with kube-apiserver's metric names, after real requests; only system:masters may read it."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

from harness.apiserver import ApiServerProcess


def get(api: ApiServerProcess, path: str, token: str) -> tuple[int, str]:
    request = urllib.request.Request(api.url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10, context=api.ssl_context()) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the first sample of `name` whose labels include `labels`."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line[len(name) : line.rindex("}")]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_request_counters_and_latency_have_kubes_names(api: ApiServerProcess) -> None:
    assert get(api, "/api/v1/namespaces/default/pods", api.token)[0] == 200
    assert get(api, "/api/v1/namespaces/default/pods/missing", api.token)[0] == 404
    assert get(api, "/api/v1/nodes", api.token)[0] == 200
    code, text = get(api, "/metrics", api.token)
    assert code == 200
    assert (sample(text, "apiserver_request_total", verb="LIST", resource="pods", code="200") or 0) >= 1
    assert (sample(text, "apiserver_request_total", verb="GET", resource="pods", code="404") or 0) >= 1
    assert (sample(text, "apiserver_request_total", verb="LIST", resource="nodes", code="200") or 0) >= 1
    count = sample(text, "apiserver_request_duration_seconds_count", verb="LIST", resource="pods")
    assert count is not None and count >= 1
    assert sample(text, "apiserver_request_duration_seconds_bucket", verb="LIST", resource="pods", le="0.05")
    for resource in ("pods", "nodes", "namespaces", "events", "leases.coordination.k8s.io"):
        assert sample(text, "apiserver_storage_objects", resource=resource) is not None, resource
    assert "# TYPE apiserver_watch_events_total counter" in text
    assert "process_resident_memory_bytes" in text


def test_watch_events_are_counted(api: ApiServerProcess) -> None:
    _, body = get(api, "/api/v1/namespaces/default/pods", api.token)
    rv = json.loads(body)["metadata"]["resourceVersion"]
    url = f"{api.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}&timeoutSeconds=10"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api.token}"})
    with urllib.request.urlopen(request, timeout=15, context=api.ssl_context()) as stream:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "counted"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip
        create = urllib.request.Request(
            api.url + "/api/v1/namespaces/default/pods",
            data=json.dumps(pod).encode(),
            headers={"Authorization": f"Bearer {api.token}", "Content-Type": "application/json"},
        )
        urllib.request.urlopen(create, timeout=10, context=api.ssl_context()).close()
        assert json.loads(stream.readline())["type"] == "ADDED"
    text = get(api, "/metrics", api.token)[1]
    assert (sample(text, "apiserver_watch_events_total", group="", version="v1", kind="Pod") or 0) >= 1


def test_metrics_need_a_privileged_user(api: ApiServerProcess) -> None:
    code, body = get(api, "/metrics", api.token_for("viewer", []))
    assert code == 403
    assert 'forbidden: User \\"viewer\\" cannot get path \\"/metrics\\"' in body
    assert get(api, "/metrics", "wrong")[0] == 401
    assert get(api, "/metrics", api.token_for("prometheus", ["system:monitoring"]))[0] == 200
