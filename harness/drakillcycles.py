"""SIGKILL the agent's DRA manager at moving points while it prepares and unprepares claims, many times.

Run as `python -m harness.drakillcycles DIR CYCLES`; prints one JSON object. The parent serves kubenode's
CPU driver (deviceplugin/dra) on real sockets and counts the prepares that did work (wrote a spec). Each
cycle starts a child process that builds the agent's DRA manager on the shared state directory and
prepares and unprepares pods with one claim each, in a loop, until the parent SIGKILLs it after a delay
that moves from cycle to cycle (0 to 60 ms after it is ready); the parent then recovers as a restarted
agent does: a manager on the same checkpoint prepares every pod again (the driver's claims must all be
in that checkpoint). At the end every pod is unprepared. Two counts must be 0: `double_prepares` (a
claim prepared by the driver while already prepared) and `leaked` (a claim the driver held that the
agent's checkpoint did not know, or a spec, driver claim or checkpoint entry left after the last
unprepare).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.cm.dra.checkpoint import ClaimStore
from agent.cm.dra.manager import DRAManager
from agent.cm.dra.plugins import DriverClient, DriverRegistry
from deviceplugin.dra.claimspecs import ClaimSpecs
from deviceplugin.dra.driver import Driver, DriverOptions, discover
from deviceplugin.dra.inventory import CPU_DRIVER
from harness.fakesysfs import write_fake_cpus
from kubenode.model import Pod, parse_pod

PODS = 3


def claim(i: int) -> dict[str, Any]:
    result = {"request": "cpus", "driver": CPU_DRIVER, "pool": "node", "device": f"cpu-{i % 2}"}
    return {
        "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"claim-{i}"},
        "status": {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": f"p{i}", "uid": f"pod-{i}"}],
        },
    }


def pod(i: int) -> Pod:
    return parse_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"pod-{i}"},
            "spec": {
                "resourceClaims": [{"name": "c", "resourceClaimName": f"c{i}"}],
                "containers": [
                    {"name": "m", "image": "x", "command": ["true"], "resources": {"claims": [{"name": "c"}]}}
                ],
            },
        }
    )


def get_claim(namespace: str, name: str) -> dict[str, Any]:
    return claim(int(name[1:]))


def manager(state: Path, driver: Driver) -> DRAManager:
    registry = DriverRegistry()
    registry.add(DriverClient(CPU_DRIVER, str(driver.dra_socket), "v1.DRAPlugin"))
    return DRAManager(ClaimStore(state), registry, get_claim)


def child(state: Path, socket: str) -> None:
    registry = DriverRegistry()
    registry.add(DriverClient(CPU_DRIVER, socket, "v1.DRAPlugin"))
    dra = DRAManager(ClaimStore(state), registry, get_claim)
    print("ready", flush=True)
    while True:
        for i in range(PODS):
            dra.prepare(pod(i))
        for i in range(PODS):
            dra.unprepare(f"pod-{i}")


class CountingSpecs(ClaimSpecs):
    """The driver's claim specs, counting the writes, and those of a claim whose spec is already there."""

    def __init__(self, specs: ClaimSpecs) -> None:
        super().__init__(specs.dir, specs.driver)
        self._lock = threading.Lock()
        self.writes = 0
        self.double = 0

    def write(
        self, claim_uid: str, devices: Sequence[tuple[str, Mapping[str, Any]]], answer: Any = None
    ) -> list[str]:
        with self._lock:
            self.double += self.path(claim_uid).exists()
            self.writes += 1
        return super().write(claim_uid, devices, answer)


def run(root: Path, cycles: int) -> dict[str, Any]:
    write_fake_cpus(root / "sys", {0: "0", 1: "1"})
    options = DriverOptions(
        node_name="node",
        registry_dir=root / "registry",
        plugin_dir=root / "plugins",
        cdi_dir=root / "cdi",
        drivers=(CPU_DRIVER,),
        sysfs_root=str(root / "sys"),
        cdi_hook_path="/usr/bin/kubenode",
    )
    state = root / "state"
    driver = Driver(CPU_DRIVER, discover(options)[CPU_DRIVER], options, get_claim)
    counting = driver.state.specs = CountingSpecs(driver.state.specs)
    driver.serve()
    leaked = 0
    started = time.monotonic()
    try:
        for cycle in range(cycles):
            # A fresh interpreter, not a fork: the parent's gRPC threads must not be copied.
            proc = subprocess.Popen(
                [sys.executable, "-m", "harness.drakillcycles", "child", str(state), str(driver.dra_socket)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"cycle {cycle}: the child agent did not start (exit {proc.wait()})")
            time.sleep((cycle % 7) * 0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            # The restarted agent: its checkpoint must know every claim the driver holds.
            dra = manager(state, driver)
            leaked += len(set(driver.state.prepared) - set(dra.store.claims))
            for i in range(PODS):
                dra.prepare(pod(i))
        dra = manager(state, driver)
        for i in range(PODS):
            dra.unprepare(f"pod-{i}")
        leaked += len(driver.state.specs.present()) + len(driver.state.prepared) + len(dra.store.claims)
    finally:
        driver.stop()
    return {
        "cycles": cycles,
        "double_prepares": counting.double,
        "leaked": leaked,
        "driver_prepares": counting.writes,
        "seconds": round(time.monotonic() - started, 2),
    }


def main(argv: list[str]) -> int:
    if argv[0] == "child":
        child(Path(argv[1]), argv[2])
        return 1
    root, cycles = Path(argv[0]), int(argv[1])
    print(json.dumps(run(root, cycles)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
