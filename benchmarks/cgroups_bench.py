"""Cost of the agent's cgroup layer on the real hierarchy: ensure() for new and existing pods, destroy().

Run as root: `.venv/bin/python benchmarks/cgroups_bench.py [--pods N]`. Uses a unique cgroup
root (/kn-bench-<random>) and removes it at the end. The floor is the same directories and
values made with bare mkdir/open/write calls, no validation or read-back.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

from benchstats import percentile, report

from agent.cm.cgroups import make_pod_cgroups
from kubenode.model import Container, Pod

MOUNT = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids")


def guaranteed_pods(count: int) -> list[Pod]:
    resources = {"cpu": 100, "memory": 64 << 20}
    pods = []
    for index in range(count):
        container = Container(name="c", command=("true",), requests=resources, limits=resources)
        pod = Pod(name=f"bench-{index}", uid=str(uuid.uuid4()), containers=(container,))
        _ = pod.qos_class, pod.requests, pod.limits  # computed once per pod, as the agent caches them
        pods.append(pod)
    return pods


def timed_ms(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def raw_floor_ms(root: str, count: int) -> float:
    """mkdir + the same writes with nothing else, for `count` pods under an existing tier."""
    tier = root.strip("/") + "/floor"
    for controller in CONTROLLERS:
        os.makedirs(MOUNT / controller / tier)
    for name in ("cpuset.cpus", "cpuset.mems"):
        (MOUNT / "cpuset" / tier / name).write_text((MOUNT / "cpuset" / name).read_text())
    writes = {
        "cpu": {"cpu.shares": "102", "cpu.cfs_quota_us": "10000"},
        "memory": {"memory.limit_in_bytes": str(64 << 20)},
        "cpuset": {"cpuset.mems": "0", "cpuset.cpus": "0-1"},
    }
    start = time.perf_counter()
    for index in range(count):
        for controller in CONTROLLERS:
            path = MOUNT / controller / tier / f"pod{index}"
            os.mkdir(path)
            for file, value in writes.get(controller, {}).items():
                with open(path / file, "w") as handle:
                    handle.write(value)
    elapsed = (time.perf_counter() - start) * 1000
    for controller in CONTROLLERS:
        for index in range(count):
            os.rmdir(MOUNT / controller / tier / f"pod{index}")
        os.rmdir(MOUNT / controller / tier)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=110)
    args = parser.parse_args()
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cgroups = make_pod_cgroups(root)
    pods = guaranteed_pods(args.pods)
    try:
        cgroups.start({"cpu": 2000, "memory": 16 << 30})
        new = [timed_ms(partial(cgroups.ensure, pod)) for pod in pods]
        again = [timed_ms(partial(cgroups.ensure, pod)) for pod in pods]
        # Each call adds or drops a Burstable pod, so the burstable tier's shares change and are written (an
        # unchanged tier is skipped by the manager for QOS_RECHECK_S and would time nothing).
        burstable = Container(name="c", command=("true",), requests={"cpu": 100})
        extra = [Pod(name="bench-burstable", uid=str(uuid.uuid4()), containers=(burstable,))]
        qos = [timed_ms(partial(cgroups.update_qos_cgroups, pods + extra * (i % 2))) for i in range(20)]
        floor = raw_floor_ms(root, args.pods)
        gone = [timed_ms(partial(cgroups.destroy, pod.uid)) for pod in pods]
    finally:
        for uid in cgroups.list_pods():
            cgroups.destroy(uid)
        cgroups.stop_and_remove_root()
    report("ensure() new Guaranteed pod p50", percentile(new, 50), "ms", "~1-2 ms")
    report("ensure() new Guaranteed pod p99", percentile(new, 99), "ms")
    report(f"ensure() {args.pods} new pods, total", sum(new), "ms", "<= 2000 ms (with syncPod)")
    report(f"raw mkdir/write floor, {args.pods} pods", floor, "ms")
    report("ensure() total / raw floor", sum(new) / floor, "x")
    report("ensure() existing pod (drift check) p50", percentile(again, 50), "ms")
    report("update_qos_cgroups() p50", percentile(qos, 50), "ms")
    report("destroy() empty pod p50", percentile(gone, 50), "ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
