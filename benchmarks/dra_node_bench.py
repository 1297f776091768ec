"""DRA on the node: the agent's DRA manager against kubenode's DRA driver on real sockets (needs root for
the syncPod part: real cgroups, v1 or v2 as the host has them).

Prints:
- prepare round trip through the agent (DRAManager.prepare of a pod with one fresh claim: checkpoint
  "preparing", NodePrepareResources over the driver's v1 socket, the driver's CDI spec written, checkpoint
  "prepared") p50/p99;
- unprepare round trip (DRAManager.unprepare: NodeUnprepareResources, the spec removed, checkpoint) p50/p99;
- syncPod of a new pod holding one `cpu.kubenode.io` claim (prepare included, no process start) p50, and
  of the same pod asking `kubenode.io/cpu: 1` of the CPU device plugin (Allocate over its socket), p50, and
  the ratio of the two (goal <= 1.5x); the two alternate in 3 rounds of 40 syncs each.
The claims are served from memory (the API server read is not part of the figure); every cgroup, socket
and file is removed at the end.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_bench import config, sweep
from benchstats import percentile, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.cm.cgroups import make_pod_cgroups
from agent.cm.devicemanager import DeviceManager
from agent.cm.dra.checkpoint import ClaimStore
from agent.cm.dra.manager import DRAManager
from agent.cm.dra.plugins import DriverClient, DriverRegistry
from agent.composition import compose_node
from agent.podworkers.types import SyncContext, UpdateType
from deviceplugin.config import parse_config
from deviceplugin.dra.driver import Driver, DriverOptions, discover
from deviceplugin.dra.inventory import CPU_DRIVER
from deviceplugin.manager import PluginManager
from harness.fakesysfs import write_fake_cpus
from kubenode.model import Pod, parse_pod

ROUND_TRIPS = 300
SYNCS = 40  # per round
ROUNDS = 3


class Claims:
    def __init__(self) -> None:
        self.by_name: dict[str, dict[str, Any]] = {}

    def add(self, i: int, pod_uid: str) -> None:
        result = {"request": "cpus", "driver": CPU_DRIVER, "pool": "bench", "device": f"cpu-{i % 2}"}
        self.by_name[f"c{i}"] = {
            "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"claim-{i}"},
            "status": {
                "allocation": {"devices": {"results": [result]}},
                "reservedFor": [{"resource": "pods", "name": "p", "uid": pod_uid}],
            },
        }

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return self.by_name[name]


def claim_pod(i: int, uid: str) -> Pod:
    return parse_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"d{i}", "namespace": "default", "uid": uid},
            "spec": {
                "resourceClaims": [{"name": "cpus", "resourceClaimName": f"c{i}"}],
                "containers": [
                    {"name": "main", "image": "example/app", "resources": {"claims": [{"name": "cpus"}]}}
                ],
            },
        }
    )


def plugin_pod(i: int, uid: str) -> Pod:
    limits = {"kubenode.io/cpu": "1"}
    return parse_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"k{i}", "namespace": "default", "uid": uid},
            "spec": {
                "containers": [{"name": "main", "image": "example/app", "resources": {"limits": limits}}]
            },
        }
    )


def fake_sysfs(root: Path) -> Path:
    return write_fake_cpus(root / "sys", {0: "0", 1: "1"})


def start_driver(work: Path, claims: Claims) -> Driver:
    options = DriverOptions(
        node_name="bench",
        registry_dir=work / "registry",
        plugin_dir=work / "plugins",
        cdi_dir=work / "cdi",
        drivers=(CPU_DRIVER,),
        sysfs_root=str(fake_sysfs(work)),
        cdi_hook_path="/usr/bin/kubenode",
    )
    driver = Driver(CPU_DRIVER, discover(options)[CPU_DRIVER], options, claims.get)
    driver.serve()
    return driver


def dra_manager(driver: Driver, claims: Claims, state: Path) -> DRAManager:
    registry = DriverRegistry()
    registry.add(DriverClient(CPU_DRIVER, str(driver.dra_socket), "v1.DRAPlugin"))
    return DRAManager(ClaimStore(state), registry, claims.get)


def bench_round_trips(work: Path) -> tuple[list[float], list[float]]:
    claims = Claims()
    driver = start_driver(work / "rt", claims)
    try:
        dra = dra_manager(driver, claims, work / "rt/state")
        prepares, unprepares = [], []
        for i in range(ROUND_TRIPS):
            uid = f"pod-{i}"
            claims.add(i, uid)
            pod = claim_pod(i, uid)
            started = time.perf_counter()
            dra.prepare(pod)
            prepares.append(time.perf_counter() - started)
            started = time.perf_counter()
            dra.unprepare(uid)
            unprepares.append(time.perf_counter() - started)
        return prepares, unprepares
    finally:
        driver.stop()


def bench_sync(work: Path, make_pod: Callable[[int, str], Pod], **parts: Any) -> list[float]:
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cgroups = make_pod_cgroups(root)
    agent = compose_node(config(root, work), cgroups, [], **parts)
    cgroups.start(agent.allocatable())
    ctx = SyncContext(threading.Event(), lambda: 30)
    samples = []
    uids = []
    try:
        for i in range(SYNCS):
            uid = f"sync-{uuid.uuid4().hex[:8]}"
            uids.append(uid)
            pod = make_pod(i, uid)
            started = time.perf_counter()
            agent.syncer.sync_pod(UpdateType.CREATE, pod, ctx)
            samples.append(time.perf_counter() - started)
            agent.cm.release(uid)  # the CPU back for the next pod (a terminated pod's release)
            agent.cm.unprepare_claims(uid)
        agent.store.flush()
    finally:
        for uid in uids:
            cgroups.destroy(uid)
        cgroups.stop_and_remove_root()
        sweep(root)
    return samples


def bench_sync_claim(work: Path) -> list[float]:
    claims = Claims()
    driver = start_driver(work / "sc", claims)
    try:
        dra = dra_manager(driver, claims, work / "sc/state")

        def make(i: int, uid: str) -> Pod:
            claims.add(i, uid)
            return claim_pod(i, uid)

        return bench_sync(work / "sc", make, dra=dra)
    finally:
        driver.stop()


def bench_sync_plugin(work: Path) -> list[float]:
    plugin_dir = work / "dp"
    devices = DeviceManager(plugin_dir, work / "dp-state")
    devices.start()
    cpu = {
        "name": "kubenode.io/cpu",
        "backend": "cpu",
        "cpu": {"reserved": "", "sysfsRoot": str(fake_sysfs(work / "dp-sys"))},
    }
    plugin = PluginManager(parse_config({"version": "v1", "resources": [cpu]}), str(plugin_dir))
    thread = threading.Thread(target=plugin.run, daemon=True)
    thread.start()
    try:
        if not devices.wait_for_resource("kubenode.io/cpu", 30):
            raise SystemExit("the CPU device plugin did not register")
        return bench_sync(work / "sp", plugin_pod, devices=devices)
    finally:
        plugin.stop()
        thread.join(timeout=10)
        devices.stop()


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="kn-dra-bench-", dir="/tmp"))
    try:
        prepares, unprepares = bench_round_trips(work)
        report("DRA prepare through the agent p50", percentile(prepares, 50) * 1000, "ms")
        report("DRA prepare through the agent p99", percentile(prepares, 99) * 1000, "ms")
        report("DRA unprepare through the agent p50", percentile(unprepares, 50) * 1000, "ms")
        report("DRA unprepare through the agent p99", percentile(unprepares, 99) * 1000, "ms")
        # Alternated in rounds, so that a busy spell of the machine weighs on both sides alike.
        claim_samples: list[float] = []
        plugin_samples: list[float] = []
        for round_ in range(ROUNDS):
            claim_samples += bench_sync_claim(work / f"r{round_}")
            plugin_samples += bench_sync_plugin(work / f"r{round_}")
        claim = percentile(claim_samples, 50)
        plugin = percentile(plugin_samples, 50)
        report("syncPod p50, one cpu.kubenode.io claim", claim * 1000, "ms")
        report("syncPod p50, kubenode.io/cpu: 1", plugin * 1000, "ms")
        report("syncPod claim / device plugin (p50)", claim / plugin, "x", "<= 1.5x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
