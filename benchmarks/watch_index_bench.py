"""Benchmark of the API server's pod watchers indexed by spec.nodeName, and of writes under node heartbeats.

Three parts, in one run:
1. In process, the watch cache alone: microseconds to apply one pod event (bound to one node, so it
   concerns one watcher) with 10 and with 1,000 node watchers, indexed (as served) and, for contrast,
   offered to every watcher (as before the index).
2. The real `kubenode apiserver` over TLS: 10, then 1,000 open pod watches with
   fieldSelector=spec.nodeName=node-<i>; pods bound to the first 10 nodes created at a steady rate;
   the server's CPU per pod event (create, commit, delivery) and delivery p99 at each count.
3. With the 1,000 watches open: 1,000 Leases renewed every 10 s (100 PUT/s) and 1,000 node status
   PATCHes every 10 s (100/s, as a kubelet without leases heartbeats; with leases it writes only on
   change or every 5 min), while pods are created at a steady rate: pod-create p99 with and without
   the heartbeats, and the heartbeats' own p99.

Goals: the cost per event at 1,000 watchers within 1.5x of 10 watchers; pod-create p99 under the
heartbeats <= 1 s (kube's SLO for single-object mutating calls).

    .venv/bin/python benchmarks/watch_index_bench.py [--watchers 1000] [--pods 400] [--rate 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
import orjson
from apiserver_bench import Server, node_body, pod_body
from benchstats import percentile, report

from apiserver.selectors import Requirement, Selector
from apiserver.storage.cache import Entry, Event, Filter, WatchCache, Watcher

LEASE_NS = "kube-node-lease"


# -- part 1: the watch cache in process ---------------------------------------------------------------


def node_watcher(node: str) -> Watcher:
    return Watcher("pods", Filter(fields=Selector((Requirement("spec.nodeName", "=", (node,)),))))


def pod_event(rev: int, node: str) -> Event:
    fields = {"spec.nodeName": node, "spec.host": node, "metadata.name": f"p{rev}", "metadata.namespace": "d"}
    entry = Entry("pods", "d", f"p{rev}", rev, b'{"kind":"Pod"}', {"app": "x"}, fields)
    return Event("ADDED", entry, None)


async def cache_cost(watchers: int, events: int, indexed: bool) -> float:
    """Microseconds per applied event (delivery to the one matching watcher's sink included)."""
    cache = WatchCache(events + 1)
    members = [node_watcher(f"node-{i}") for i in range(watchers)]
    for watcher in members:
        watcher.go_direct(lambda data, count: True)
        if indexed:
            cache.add_watcher(watcher)
    batch = [pod_event(rev, f"node-{rev % 10}") for rev in range(1, events + 1)]
    start = time.perf_counter()
    for event in batch:
        cache.apply(event, 0.0)
        if not indexed:
            for watcher in members:
                watcher.offer(event, 0.0)
        await asyncio.sleep(0)  # the flush of what was offered
    return (time.perf_counter() - start) / events * 1e6


# -- part 2: the server with node watchers -----------------------------------------------------------


class Watches:
    """Pod watches, one per node, read line by line; each ADDED line's arrival time by pod name."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.session = aiohttp.ClientSession(
            connector=server.connector(limit=0), headers=server.headers, timeout=aiohttp.ClientTimeout()
        )
        self.tasks: list[asyncio.Task[None]] = []
        self.arrivals: dict[bytes, float] = {}

    async def open(self, first: int, last: int, rv: str) -> None:
        ready = [asyncio.Event() for _ in range(first, last)]
        for i, event in zip(range(first, last), ready, strict=True):
            self.tasks.append(asyncio.create_task(self._watch(f"node-{i}", rv, event)))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in ready)), 300)

    async def _watch(self, node: str, rv: str, ready: asyncio.Event) -> None:
        url = f"{self.server.url}/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1800"
        async with self.session.get(url + f"&fieldSelector=spec.nodeName%3D{node}") as r:
            ready.set()
            async for line in r.content:
                if line.startswith(b'{"type":"ADDED"'):
                    at = line.find(b'"name":"') + 8
                    self.arrivals[line[at : line.find(b'"', at)]] = time.perf_counter()

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.session.close()


async def steady(rate: float, count: int, action: Callable[[int], Coroutine[Any, Any, None]]) -> None:
    """Start `action(i)` at `rate` per second, without waiting for one to finish before the next."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks: list[asyncio.Task[None]] = []
    for i in range(count):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(action(i)))
    await asyncio.gather(*tasks)


class Writer:
    """A session for writes that records each call's latency under a label."""

    def __init__(self, server: Server, limit: int = 64) -> None:
        self.server = server
        self.session = aiohttp.ClientSession(connector=server.connector(limit), headers=server.headers)
        self.latency: dict[str, list[float]] = {}

    async def call(
        self, label: str, method: str, path: str, body: Any, content_type: str = "application/json"
    ) -> dict[str, Any]:
        start = time.perf_counter()
        headers = {"Content-Type": content_type}
        data = None if body is None else orjson.dumps(body)
        async with self.session.request(method, self.server.url + path, data=data, headers=headers) as r:
            payload = await r.read()
            if r.status >= 300:
                raise SystemExit(f"{method} {path} answered {r.status}: {payload[:300]!r}")
        self.latency.setdefault(label, []).append(time.perf_counter() - start)
        result: dict[str, Any] = orjson.loads(payload)
        return result

    async def close(self) -> None:
        await self.session.close()


async def pod_events(
    server: Server, writer: Writer, watches: Watches, label: str, pods: int, rate: float, quiet: bool = False
) -> float:
    """Create `pods` pods bound to node-0..9; report server CPU per event and delivery p99; return the CPU."""
    sent: dict[bytes, float] = {}

    async def create(i: int) -> None:
        name = f"{label.split()[0]}-{'hb' if 'heartbeats' in label else 'q'}-{i}"
        sent[name.encode()] = time.perf_counter()
        await writer.call(
            "create " + label, "POST", "/api/v1/namespaces/default/pods", pod_body(name, f"node-{i % 10}")
        )

    cpu = server.cpu_seconds()
    await steady(rate, pods, create)
    deadline = time.monotonic() + 60
    while any(name not in watches.arrivals for name in sent) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    cpu = server.cpu_seconds() - cpu
    missing = [name for name in sent if name not in watches.arrivals]
    if missing:
        raise SystemExit(f"{len(missing)} pod events never reached their node's watcher, e.g. {missing[0]!r}")
    delays = [watches.arrivals[name] - at for name, at in sent.items()]
    if not quiet:
        report(f"server CPU per pod event, {label}", cpu / pods * 1000, "ms")
        report(f"watch delivery p99, {label}", percentile(delays, 99) * 1000, "ms")
    return cpu / pods


# -- part 3: heartbeats -------------------------------------------------------------------------------


def lease_body(node: str) -> dict[str, Any]:
    spec = {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now_micro()}
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": node}, "spec": spec}


def now_micro() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


async def heartbeats(writer: Writer, nodes: int, period: float, stop: asyncio.Event) -> int:
    """Renew every Lease and PATCH every Node's status once per `period`, spread evenly; until `stop`."""
    versions: dict[str, str] = {}
    beats = 0

    async def beat(i: int) -> None:
        node = f"node-{i}"
        lease = lease_body(node)
        lease["metadata"]["resourceVersion"] = versions[node]
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{node}"
        versions[node] = (await writer.call("PUT leases", "PUT", path, lease))["metadata"]["resourceVersion"]
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "lastHeartbeatTime": now_micro(),
        }
        patch = {"status": {"conditions": [ready]}}
        await writer.call(
            "PATCH nodes/status",
            "PATCH",
            f"/api/v1/nodes/{node}/status",
            patch,
            "application/strategic-merge-patch+json",
        )

    for i in range(nodes):
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases"
        versions[f"node-{i}"] = (await writer.call("setup", "POST", path, lease_body(f"node-{i}")))[
            "metadata"
        ]["resourceVersion"]
    loop = asyncio.get_running_loop()
    start = loop.time()
    pending: set[asyncio.Task[None]] = set()
    while not stop.is_set():
        delay = start + beats * period / nodes - loop.time()
        if delay > 0:
            try:
                await asyncio.wait_for(stop.wait(), delay)
                break
            except TimeoutError:
                pass
        task = asyncio.create_task(beat(beats % nodes))
        pending.add(task)
        task.add_done_callback(pending.discard)
        beats += 1
    await asyncio.gather(*pending)
    return beats


async def main_async(args: argparse.Namespace) -> None:
    for watchers in (10, args.watchers):
        for indexed in (True, False):
            cost = await cache_cost(watchers, 5000, indexed)
            how = "indexed" if indexed else "no index"
            report(f"cache cost per pod event, {watchers} watchers, {how}", cost, "µs")

    server = Server()
    watches: Watches | None = None
    writer: Writer | None = None
    try:
        await server.wait_ready()
        writer = Writer(server)
        setup = Writer(server, limit=8)
        for i in range(args.watchers):
            await setup.call("setup", "POST", "/api/v1/nodes", node_body(f"node-{i}"))
        await setup.close()
        rv = str((await writer.call("list", "GET", "/api/v1/pods", None))["metadata"]["resourceVersion"])
        watches = Watches(server)
        await watches.open(0, 10, rv)
        await pod_events(server, writer, watches, "warmup", args.pods // 2, args.rate, quiet=True)
        few = await pod_events(server, writer, watches, "10 watchers", args.pods, args.rate)
        await watches.open(10, args.watchers, rv)
        many = await pod_events(server, writer, watches, f"{args.watchers} watchers", args.pods, args.rate)
        report(f"CPU per event, {args.watchers} / 10 watchers", many / few, "x", "<= 1.5x")
        low = writer.latency["create 10 watchers"]
        high = writer.latency[f"create {args.watchers} watchers"]
        report(f"pod create p99, {args.watchers} watchers, quiet", percentile(high, 99) * 1000, "ms")
        report("pod create p99, 10 watchers, quiet", percentile(low, 99) * 1000, "ms")

        stop = asyncio.Event()
        beating = asyncio.create_task(heartbeats(writer, args.watchers, 10.0, stop))
        await asyncio.sleep(12)  # one whole round of heartbeats before measuring
        label = f"{args.watchers} watchers + heartbeats"  # the CPU figure includes the heartbeats' own
        await pod_events(server, writer, watches, label, args.pods, args.rate)
        stop.set()
        beats = await beating
        creates = writer.latency[f"create {label}"]
        report(f"pod create p99, {label}", percentile(creates, 99) * 1000, "ms", "<= 1000 ms")
        report("lease renewal (PUT) p99 meanwhile", percentile(writer.latency["PUT leases"], 99) * 1000, "ms")
        report(
            "node status PATCH p99 meanwhile",
            percentile(writer.latency["PATCH nodes/status"], 99) * 1000,
            "ms",
        )
        report("heartbeats sent (lease PUT + status PATCH each)", beats, "")
    finally:
        if watches is not None:
            await watches.close()
        if writer is not None:
            await writer.close()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=400, help="pods created per measured phase")
    parser.add_argument("--rate", type=float, default=40.0, help="pod creates per second")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", str(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
