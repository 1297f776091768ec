"""Benchmark of `kubenode apiserver`: the real server process over a real socket, loaded by aiohttp clients.

Prints: durable pod creates per second with 8 concurrent clients (each create answered only after its COMMIT),
create latency p50/p99, a list of 10,000 pods, watch delivery p99 with 100 watchers, and the server's RSS
with 5,000 nodes and 10,000 pods stored. Goals (2 cores): >= 1,000 creates/s, p99 watch delivery <= 50 ms,
list <= 1 s, RSS <= 400 MiB.

    .venv/bin/python benchmarks/apiserver_bench.py [--pods 10000] [--nodes 5000] [--watchers 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import psutil
from benchstats import percentile, report, rss_mib

from apiserver.auth.tokens import token_for

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pod_body(name: str, node: str) -> dict[str, Any]:
    """A pod of the size the scheduler and agent handle: labels, one container with requests and limits."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench", "tier": name[-1]}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/bench:1.0",
                    "command": ["/bin/sleep", "3600"],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"memory": "128Mi"},
                    },
                    "env": [{"name": "MODE", "value": "bench"}],
                }
            ],
        },
    }


def node_body(name: str) -> dict[str, Any]:
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.37.0", "osImage": "Debian", "kernelVersion": "6.1"},
        },
    }


class Server:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kubenode-apiserver-bench-"))
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"  # TLS even on loopback, as kubectl needs for tokens
        cmd = [sys.executable, "-m", "cli.main", "apiserver", "--data-dir", str(self.dir / "data")]
        cmd += ["--bind-address", "127.0.0.1", "--port", str(self.port)]
        cmd += ["--write-kubeconfig", str(self.dir / "kubeconfig")]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.token = ""
        self.ssl: ssl.SSLContext | None = None

    def connector(self, limit: int = 100) -> aiohttp.TCPConnector:
        return aiohttp.TCPConnector(limit=limit, ssl=self.ssl if self.ssl is not None else False)

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.proc.pid).cpu_times()
        return float(times.user + times.system)

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode() if self.proc.stderr else ""
            raise SystemExit(f"kubenode apiserver exited: {err}")

    async def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        ca = self.dir / "data" / "pki" / "ca.crt"
        while not ca.exists() and time.monotonic() < deadline:  # made on first start
            self._check_alive()
            await asyncio.sleep(0.05)
        self.ssl = ssl.create_default_context(cafile=str(ca))
        async with aiohttp.ClientSession(connector=self.connector()) as session:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    async with session.get(self.url + "/readyz") as r:
                        if r.status == 200:
                            break
                except (aiohttp.ClientError, OSError):
                    pass
                await asyncio.sleep(0.05)
            else:
                raise SystemExit("kubenode apiserver did not become ready within 30 s")
        self.token = token_for(self.dir / "data" / "tokens.csv", "admin") or ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


async def create_many(server: Server, path: str, bodies: list[dict[str, Any]], clients: int) -> list[float]:
    """POST every body with `clients` concurrent connections; the latency of each create in seconds."""
    latencies: list[float] = []
    queue = iter(bodies)

    async def client() -> None:
        async with aiohttp.ClientSession(connector=server.connector(1), headers=server.headers) as session:
            for body in queue:
                data = orjson.dumps(body)
                start = time.perf_counter()
                async with session.post(server.url + path, data=data) as r:
                    await r.read()
                    if r.status != 201:
                        raise SystemExit(f"create answered {r.status}: {await r.text()}")
                latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies


async def time_list(server: Server, path: str, repeats: int = 3) -> tuple[float, int]:
    best, count = float("inf"), 0
    async with aiohttp.ClientSession(connector=server.connector(), headers=server.headers) as session:
        for _ in range(repeats):
            start = time.perf_counter()
            async with session.get(server.url + path) as r:
                body = await r.read()
            best = min(best, time.perf_counter() - start)
            count = len(orjson.loads(body)["items"])
    return best, count


async def watch_delivery(
    server: Server, watchers: int, events: int, rate: float
) -> tuple[list[float], list[float]]:
    """Per (event, watcher): seconds from sending the create, and from its acknowledgement (0 when the
    event came first), to the watcher reading the ADDED line. The commit lies between the two."""
    sent: dict[bytes, float] = {}
    acked: dict[bytes, float] = {}
    arrivals: list[tuple[bytes, float]] = []
    ready = asyncio.Event()
    started = 0

    async def watcher(session: aiohttp.ClientSession, rv: str) -> None:
        nonlocal started
        url = (
            f"{server.url}/api/v1/namespaces/watchbench/pods?watch=1&resourceVersion={rv}&timeoutSeconds=300"
        )
        async with session.get(url) as r:
            started += 1
            if started == watchers:
                ready.set()
            seen = 0
            async for line in r.content:
                # Only the type and the name, without decoding the object: the client's own parsing of
                # 100 copies of each event would otherwise be measured as delivery delay.
                if not line.startswith(b'{"type":"ADDED"'):
                    continue
                at = line.find(b'"name":"') + 8
                arrivals.append((line[at : line.find(b'"', at)], time.perf_counter()))
                seen += 1
                if seen == events:
                    return

    async with aiohttp.ClientSession(
        connector=server.connector(watchers + 8), headers=server.headers
    ) as session:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "watchbench"}}
        async with session.post(server.url + "/api/v1/namespaces", data=orjson.dumps(ns)) as r:
            await r.read()
        async with session.get(server.url + "/api/v1/namespaces/watchbench/pods") as r:
            rv = orjson.loads(await r.read())["metadata"]["resourceVersion"]
        tasks = [asyncio.create_task(watcher(session, rv)) for _ in range(watchers)]
        await asyncio.wait_for(ready.wait(), 30)
        for i in range(events):
            name = f"w-{i}"
            sent[name.encode()] = time.perf_counter()
            path = "/api/v1/namespaces/watchbench/pods"
            async with session.post(server.url + path, data=orjson.dumps(pod_body(name, "node-0"))) as r:
                await r.read()
            acked[name.encode()] = time.perf_counter()
            await asyncio.sleep(1 / rate)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    from_send = [at - sent[name] for name, at in arrivals]
    from_ack = [max(0.0, at - acked[name]) for name, at in arrivals]
    return from_send, from_ack


async def main_async(args: argparse.Namespace) -> None:
    server = Server()
    try:
        await server.wait_ready()
        first = min(args.pods, 4000)
        bodies = [pod_body(f"bench-{i}", f"node-{i % args.nodes}") for i in range(first)]
        cpu_before, start = server.cpu_seconds(), time.perf_counter()
        latencies = await create_many(server, "/api/v1/namespaces/default/pods", bodies, clients=8)
        elapsed, cpu = time.perf_counter() - start, server.cpu_seconds() - cpu_before
        report("pod creates/s, 8 clients, durable", len(bodies) / elapsed, "/s", ">= 1000/s")
        # Independent of what else runs on the machine: the server's own CPU (all threads) per create.
        report("server CPU per durable create", cpu / len(bodies) * 1000, "ms")
        report("create latency p50", percentile(latencies, 50) * 1000, "ms")
        report("create latency p99", percentile(latencies, 99) * 1000, "ms")
        rest = [pod_body(f"bench-{i}", f"node-{i % args.nodes}") for i in range(first, args.pods)]
        await create_many(server, "/api/v1/namespaces/default/pods", rest, clients=8)
        seconds, count = await time_list(server, "/api/v1/pods")
        report(f"list of {count} pods (best of 3)", seconds, "s", "<= 1 s")
        from_send, from_ack = await watch_delivery(server, args.watchers, events=100, rate=50)
        report(f"watch delivery p50, {args.watchers} watchers", percentile(from_send, 50) * 1000, "ms")
        label = f"watch delivery p99, {args.watchers} watchers"
        report(label, percentile(from_send, 99) * 1000, "ms", "<= 50 ms")
        report(label + ", from the ack", percentile(from_ack, 99) * 1000, "ms")
        nodes = [node_body(f"node-{i}") for i in range(args.nodes)]
        await create_many(server, "/api/v1/nodes", nodes, clients=8)
        report(
            f"server RSS, {args.nodes} nodes + {args.pods} pods",
            rss_mib(server.proc.pid),
            "MiB",
            "<= 400 MiB",
        )
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--watchers", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
