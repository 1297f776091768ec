"""Extender round trip: POST /filter then /prioritize for one pod over 5,000 node names (nodeCacheCapable).

kube-scheduler calls the extender for every pod it schedules, so this latency adds to each
scheduling cycle. The extender (the same aiohttp app `kubenode scheduler extender` serves)
runs in a child process with its cache filled directly: the nodes of scheduler_bench (half
with 8 GPUs) and pods bound to them using some of those GPUs, and the profile of
deploy/extender/deployment.yaml (MostAllocated over GPUs). The client, in this process,
sends what kube-scheduler sends: ExtenderArgs{Pod, NodeNames} with all 5,000 names to
/filter, then the names that passed to /prioritize, over one keep-alive connection.
Prints p50/p95/p99 of the round trip (both calls), p50 of each call, and the server's CPU
per round trip (a figure the machine's other load moves less than wall time).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import time
from multiprocessing.connection import Connection
from pathlib import Path

import orjson
import psutil
import urllib3
import yaml
from benchstats import percentile, report
from scheduler_bench import GPU, make_nodes, make_pods

from kubenode.model.objects import Container, Pod

DEPLOYMENT = Path(__file__).parents[1] / "deploy" / "extender" / "deployment.yaml"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train", "namespace": "default", "uid": "bench-uid"},
    "spec": {
        "containers": [
            {
                "name": "c",
                "image": "trainer",
                "resources": {
                    "requests": {"cpu": "2", "memory": "8Gi", GPU: "2"},
                    "limits": {"cpu": "2", "memory": "8Gi", GPU: "2"},
                },
            }
        ]
    },
}


def serve(nodes: int, pods: int, conn: Connection) -> None:
    from aiohttp import web

    from scheduler.extender.server import Extender, settle_heap
    from scheduler.extender.state import ExtenderState
    from scheduler.profile import parse_configuration

    # The profile deploy/extender/ gives the extender: NodeResourcesFit MostAllocated over GPUs.
    manifests = list(yaml.safe_load_all(DEPLOYMENT.read_text()))
    profile = yaml.safe_load(manifests[0]["data"]["profile.yaml"])
    state = ExtenderState(parse_configuration(profile, "bench"))
    rng = random.Random(1)
    node_objects = make_nodes(nodes, rng)
    for node in node_objects:
        state.node_changed(node)
    gpu_nodes = [n.name for n in node_objects if GPU in n.allocatable]
    for i, pod in enumerate(make_pods(pods, rng)):
        requests = dict(pod.containers[0].requests)
        if GPU in requests:
            requests[GPU] = min(requests[GPU], 2)  # fill some GPU nodes, leave others free
        bound = Pod(
            name=pod.name,
            uid=f"u{i}",
            node_name=gpu_nodes[i % len(gpu_nodes)] if GPU in requests else node_objects[i % nodes].name,
            containers=(Container(name="main", requests=requests, limits=requests),),
        )
        state.pod_changed(bound)

    settle_heap()  # as the server does once its informers have synced

    async def main() -> None:
        runner = web.AppRunner(Extender(state, None).app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        conn.send(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000, help="pods bound in the extender's cache")
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(
        target=serve, args=(args.nodes, args.pods, child), daemon=True
    )
    server.start()
    try:
        if not parent.poll(120):
            raise SystemExit("the extender did not start")
        port = parent.recv()
        http = urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=1, retries=False)
        names = [f"node-{i:05d}" for i in range(args.nodes)]
        filter_body = orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": names})
        headers = {"Content-Type": "application/json"}

        def call(verb: str, body: bytes) -> object:
            resp = http.request("POST", f"/{verb}", body=body, headers=headers)
            assert resp.status == 200, resp.data[:200]
            return orjson.loads(resp.data)

        totals, filters, prioritizes = [], [], []
        passed_counts = []
        process = psutil.Process(server.pid)
        for round_ in range(args.rounds + 20):
            if round_ == 20:
                cpu_start = sum(process.cpu_times()[:2])
            start = time.perf_counter()
            result = call("filter", filter_body)
            middle = time.perf_counter()
            assert isinstance(result, dict)
            passed = result["NodeNames"]
            call("prioritize", orjson.dumps({"Pod": POD, "Nodes": None, "NodeNames": passed}))
            end = time.perf_counter()
            if round_ >= 20:  # the first rounds warm caches and connections
                totals.append((end - start) * 1000)
                filters.append((middle - start) * 1000)
                prioritizes.append((end - middle) * 1000)
                passed_counts.append(len(passed))
        server_cpu = (sum(process.cpu_times()[:2]) - cpu_start) / args.rounds * 1000
        print(
            f"{args.nodes} node names, {args.pods} bound pods in the extender's cache; "
            f"{passed_counts[-1]} nodes pass the filter; {args.rounds} rounds"
        )
        report("extender filter+prioritize p50", percentile(totals, 50), "ms")
        report("extender filter+prioritize p95", percentile(totals, 95), "ms")
        report("extender filter+prioritize p99", percentile(totals, 99), "ms", "<= 10")
        report("extender filter p50", percentile(filters, 50), "ms")
        report("extender prioritize p50", percentile(prioritizes, 50), "ms")
        report("extender server CPU per round trip", server_cpu, "ms")
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
