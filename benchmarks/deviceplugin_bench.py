"""Device plugin figures: Allocate round trip, health-change latency, re-registration time, RSS, idle CPU.

The plugin runs as its own process (`kubenode deviceplugin --config tests/configs/static.yaml`);
the kubelet side is the real agent.cm.devicemanager.DeviceManager in this process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import psutil
from benchstats import percentile, report, rss_mib

from agent.cm.devicemanager import DeviceManager
from kubenode.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc
from kubenode.deviceapi import KUBELET_DIR_ENV, UNHEALTHY

CONFIG = Path(__file__).resolve().parent.parent / "tests/configs/static.yaml"
RESOURCES = ("example.com/dongle", "example.com/accel")
DONGLE_SOCKET = "kubenode-example.com-dongle.sock"
ALLOCATE_CALLS = 2000
HEALTH_FLIPS = 100
STOP_GRACE_S = 10.0
RESTARTS = 10


def start_kubelet(plugin_dir: Path, state: Path) -> DeviceManager:
    manager = DeviceManager(plugin_dir, state)
    manager.start()
    return manager


def wait_registered(manager: DeviceManager, timeout: float) -> bool:
    return all(manager.wait_for_resource(name, timeout) for name in RESOURCES)


def bench_allocate(stub: Any) -> None:
    request = api_pb2.AllocateRequest(
        container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["dongle-0", "dongle-1"])]
    )
    for _ in range(100):  # warm up
        stub.Allocate(request, timeout=5)
    samples = []
    for _ in range(ALLOCATE_CALLS):
        started = time.perf_counter()
        stub.Allocate(request, timeout=5)
        samples.append((time.perf_counter() - started) * 1000)
    report("Allocate round trip p50", percentile(samples, 50), "ms")
    report("Allocate round trip p99", percentile(samples, 99), "ms", "<= 2 ms")


def bench_health(stub: Any, health_file: Path) -> None:
    stream = stub.ListAndWatch(api_pb2.Empty())
    next(stream)
    samples = []
    for flip in range(HEALTH_FLIPS):
        unhealthy = flip % 2 == 0
        started = time.perf_counter()
        health_file.write_text("dongle-1\n" if unhealthy else "")
        while True:
            devices = {d.ID: d.health for d in next(stream).devices}
            if (devices["dongle-1"] == UNHEALTHY) == unhealthy:
                break
        samples.append((time.perf_counter() - started) * 1000)
    stream.cancel()
    report("health change -> ListAndWatch p50", percentile(samples, 50), "ms")
    report("health change -> ListAndWatch p99", percentile(samples, 99), "ms", "<= 100 ms")


def bench_reregistration(kubelet: DeviceManager, plugin_dir: Path, root: Path) -> DeviceManager:
    samples = []
    for round_ in range(RESTARTS):
        kubelet.stop()
        started = time.perf_counter()
        kubelet = start_kubelet(plugin_dir, root / f"state-{round_}")
        if not wait_registered(kubelet, 5):
            raise SystemExit("plugin did not re-register within 5 s")
        samples.append((time.perf_counter() - started) * 1000)
    report("re-registration after kubelet restart p50", percentile(samples, 50), "ms")
    report("re-registration after kubelet restart max", max(samples), "ms", "<= 1000 ms")
    return kubelet


def stop_plugin(plugin: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM, then SIGKILL if it has not exited within the grace: a hung plugin never outlives the run."""
    plugin.send_signal(signal.SIGTERM)
    try:
        plugin.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        print(f"plugin did not stop within {grace_s:g} s of SIGTERM; killing it", file=sys.stderr)
        plugin.kill()
        plugin.wait()


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="kn-bench-", dir="/tmp"))
    plugin_dir = root / "plugins"
    kubelet = start_kubelet(plugin_dir, root / "state")
    env = {**os.environ, KUBELET_DIR_ENV: str(plugin_dir)}
    plugin = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "--log-level",
            "WARNING",
            "deviceplugin",
            "--config",
            str(CONFIG),
        ],
        env=env,
    )
    try:
        if not wait_registered(kubelet, 20):
            raise SystemExit("plugin did not register")
        report("plugin RSS after start", rss_mib(plugin.pid), "MiB")
        with grpc.insecure_channel(f"unix://{plugin_dir / DONGLE_SOCKET}") as channel:
            stub = api_pb2_grpc.DevicePluginStub(channel)
            bench_allocate(stub)
            bench_health(stub, plugin_dir / "static-health")
        kubelet = bench_reregistration(kubelet, plugin_dir, root)
        process = psutil.Process(plugin.pid)
        before = process.cpu_times()
        time.sleep(3.0)  # measuring idle cost: nothing to wait for
        after = process.cpu_times()
        # max(): the two readings are clock ticks apart at most; never print a negative zero
        idle = max(0.0, (after.user + after.system - before.user - before.system) / 3.0 * 100)
        report("plugin CPU while idle", idle, "%", "near 0")
        report("plugin RSS after benchmark", rss_mib(plugin.pid), "MiB", "<= 60 MiB")
    finally:
        try:
            stop_plugin(plugin)
        finally:
            kubelet.stop()
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
