"""Cost of the agent's cgroup layer on the real hierarchy: ensure() for new and existing pods, destroy().

Run as root: `.venv/bin/python benchmarks/cgroups_bench.py [--pods N]`. Uses a unique cgroup
root (/kn-bench-<random>) and removes it at the end. The floor is the same directories and
values made with bare mkdir/open/write calls, no validation or read-back, in the host's cgroup
version's files (benchmarks/cgroupfloor.py, which agent_bench.py's floor uses too).
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from functools import partial

from benchstats import percentile, report
from cgroupfloor import PodLimits, RawCgroups

from agent.cm.cgroups import make_pod_cgroups
from agent.cm.cgroups.formulas import milli_cpu_to_quota, milli_cpu_to_shares
from kubenode.model import Container, Pod

MILLI_CPU = 100
MEMORY = 64 << 20


def guaranteed_pods(count: int) -> list[Pod]:
    resources = {"cpu": MILLI_CPU, "memory": MEMORY}
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
    raw = RawCgroups()
    tier = root.strip("/") + "/floor"
    raw.make_tier(tier)
    limits = PodLimits(milli_cpu_to_shares(MILLI_CPU), milli_cpu_to_quota(MILLI_CPU), MEMORY)
    start = time.perf_counter()
    try:
        for index in range(count):
            raw.make_pod(f"{tier}/pod{index}", limits)
        return (time.perf_counter() - start) * 1000
    finally:
        raw.remove(tier)


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
