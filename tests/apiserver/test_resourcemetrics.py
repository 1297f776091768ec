"""metrics.k8s.io's arithmetic without servers: the Prometheus text parsed, CPU rated between two scrapes,
a first scrape repeated for a rate, fresh results reused, a node that fails left out."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.handlers.nodemetrics import node_metrics, pod_metrics
from apiserver.resourcemetrics import (
    FIRST_WINDOW_S,
    ResourceMetrics,
    Sample,
    Usage,
    node_usage,
    parse_samples,
)

WEB = '{container="main",namespace="default",pod="web"}'


def text(node_cpu: float, container_cpu: float, ms: int) -> str:
    return (
        "# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node\n"
        "# TYPE node_cpu_usage_seconds_total counter\n"
        f"node_cpu_usage_seconds_total {node_cpu} {ms}\n"
        f"node_memory_working_set_bytes 2.097152e+09 {ms}\n"
        f"container_cpu_usage_seconds_total{WEB} {container_cpu} {ms}\n"
        f"container_memory_working_set_bytes{WEB} 1048576 {ms}\n"
        f'container_memory_working_set_bytes{{container="a\\"b",namespace="x",pod="y"}} 1 {ms}\n'
        "resource_scrape_error 0\n"
    )


def test_parse_samples() -> None:
    samples = parse_samples(text(10.5, 1.0, 1000))
    assert samples[("node_cpu_usage_seconds_total", ())] == Sample(10.5, 1000)
    key = ("container_memory_working_set_bytes", (("container", 'a"b'), ("namespace", "x"), ("pod", "y")))
    assert samples[key] == Sample(1.0, 1000)
    assert samples[("resource_scrape_error", ())] == Sample(0.0, None)


def test_cpu_is_a_rate_between_scrapes() -> None:
    before, now = parse_samples(text(10.0, 1.0, 1000)), parse_samples(text(12.0, 1.25, 3000))
    usage = node_usage("n1", now, before, 3.0, 1.0)
    assert usage is not None and usage.window == 2.0
    assert usage.usage == Usage(1_000_000_000, 2_097_152_000)
    assert usage.pods[("default", "web")]["main"] == Usage(125_000_000, 1_048_576)
    node = node_metrics({"metadata": {"labels": {"a": "b"}}}, usage)
    assert node["usage"] == {"cpu": "1000000000n", "memory": "2048000Ki"} and node["window"] == "2s"
    pod = pod_metrics({"metadata": {"name": "web", "namespace": "default"}}, usage)
    assert pod is not None and pod["containers"] == [
        {"name": "main", "usage": {"cpu": "125000000n", "memory": "1024Ki"}}
    ]
    assert node_usage("n1", now, {}, 3.0, 3.0) is None  # no previous scrape: no rate


def test_a_first_scrape_is_repeated_and_a_fresh_result_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    calls: list[str] = []

    async def scrape(node: str, address: str) -> str:
        calls.append(node)
        if node == "broken":
            raise OSError("connection refused")
        return text(now[0] * 0.5, now[0] * 0.1, int(now[0] * 1000))

    async def sleep(seconds: float) -> None:
        assert seconds == FIRST_WINDOW_S
        now[0] += seconds

    monkeypatch.setattr("apiserver.resourcemetrics.asyncio.sleep", sleep)
    metrics = ResourceMetrics(scrape, clock=lambda: now[0])
    endpoints = {"n1": "10.0.0.1:1", "broken": "10.0.0.2:1"}
    first = asyncio.run(metrics.current(endpoints))
    assert set(first) == {"n1"} and first["n1"].usage.cpu_nanocores == 500_000_000
    assert calls == ["broken", "n1", "n1"]  # every node, then the new ones that answered, a second later
    asyncio.run(metrics.current(endpoints))
    assert len(calls) == 3  # younger than FRESH_S: reused
    now[0] += 5
    later = asyncio.run(metrics.current({"n1": "10.0.0.1:1"}))
    assert len(calls) == 4 and later["n1"].window == 5.0
