"""Benchmark of the Node authorizer's graph (apiserver/auth/nodegraph.py) on the watch cache, in process.

Prints, for 10,000 pods on 100 nodes (each pod with 3 Secret/ConfigMap references): the graph's first build,
one authorization question when nothing changed (and, as its floor, a dict lookup), the catch-up after 10,000
pod status updates (which change no reference), and after 1,000 new pods. Goals: a question within 20x a
dict lookup; catching up on status churn costs no JSON parse per event (at most 2 ms per 1,000 events).

    .venv/bin/python benchmarks/nodegraph_bench.py [--pods 10000] [--nodes 100]
"""

from __future__ import annotations

import argparse
import time

import orjson
from benchstats import report

from apiserver.auth.nodegraph import NodeGraph
from apiserver.storage.cache import Entry, Event, WatchCache


def pod_entry(rev: int, index: int, nodes: int, phase: str = "Pending") -> Entry:
    node = f"n{index % nodes}"
    volumes = [
        {"name": "c", "configMap": {"name": f"cm{index}"}},
        {"name": "s", "secret": {"secretName": f"s{index}"}},
    ]
    env = [{"name": "E", "valueFrom": {"secretKeyRef": {"name": f"e{index}", "key": "k"}}}]
    pod = {
        "metadata": {"name": f"p{index}", "namespace": "default"},
        "spec": {"nodeName": node, "volumes": volumes, "containers": [{"name": "m", "env": env}]},
        "status": {"phase": phase},
    }
    return Entry("pods", "default", f"p{index}", rev, orjson.dumps(pod), {}, {"spec.nodeName": node})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--nodes", type=int, default=100)
    args = parser.parse_args()
    cache = WatchCache(history_size=max(20000, 2 * args.pods))
    rev = 0
    for index in range(args.pods):
        rev += 1
        cache.apply(Event("ADDED", pod_entry(rev, index, args.nodes), None), 0.0)
    graph = NodeGraph(cache)

    started = time.perf_counter()
    assert graph.has_path("n1", "secrets", "default", "s1")
    report(f"graph build, {args.pods} pods", (time.perf_counter() - started) * 1000, "ms")

    rounds = 100_000
    started = time.perf_counter()
    for _ in range(rounds):
        graph.has_path("n1", "secrets", "default", "s1")
    question = (time.perf_counter() - started) / rounds
    table = {("secrets", "default", f"s{i}"): 1 for i in range(1000)}
    started = time.perf_counter()
    for _ in range(rounds):
        _ = table.get(("secrets", "default", "s1"), 0) > 0
    floor = (time.perf_counter() - started) / rounds
    report("authorization question, nothing changed", question * 1e6, "us")
    report("  ratio to a dict lookup", question / floor, "x", "<= 20x")

    for index in range(args.pods):  # status churn: every pod once
        rev += 1
        cache.apply(
            Event(
                "MODIFIED",
                pod_entry(rev, index, args.nodes, "Running"),
                cache.get("pods", "default", f"p{index}"),
            ),
            0.0,
        )
    started = time.perf_counter()
    graph.has_path("n2", "secrets", "default", "s2")
    churn = time.perf_counter() - started
    report(f"catch-up after {args.pods} status updates", churn * 1000, "ms")
    report("  per 1,000 events", churn * 1000 / (args.pods / 1000), "ms", "<= 2 ms")

    for index in range(args.pods, args.pods + 1000):
        rev += 1
        cache.apply(Event("ADDED", pod_entry(rev, index, args.nodes), None), 0.0)
    started = time.perf_counter()
    assert graph.has_path(f"n{args.pods % args.nodes}", "secrets", "default", f"s{args.pods}")
    report("catch-up after 1,000 new pods", (time.perf_counter() - started) * 1000, "ms")


if __name__ == "__main__":
    main()
