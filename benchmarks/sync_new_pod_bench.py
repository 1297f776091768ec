"""syncPod for a new pod (no process start), alone, in a form that also runs in an older tree.

agent_bench.py's first figure (QoS class, tiers, pod cgroup and limits, pod record; the pods' containers
have only an image, so no process starts), without the rest of that script: `benchmarks/ab_baseline.py`
copies nothing, so this file is copied into the baseline worktree and run there with its interpreter, and
it finds the agent's pieces under either layout: this tree's (agent/composition.py, since issue 20) or
b596920's (agent/node.py's NodeAgent), the commit issue 42's cgroup v2 goal compares with.

    .venv/bin/python benchmarks/sync_new_pod_bench.py [--samples 200]

On this v1 host it uses v1; in the cgroup v2 guest (benchmarks/cgroup2_guest_bench.py --ab) v2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchstats import percentile, report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubenode.model import parse_pod

LABEL = "agent syncPod new pod p50 (no process start)"  # agent_bench.py's


def _find(*places: tuple[str, str]) -> Any:
    """The first of (module, name) that this tree has."""
    for module, name in places:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise SystemExit(f"sync_new_pod_bench: none of {places} in this tree")


def agent_for(root: str, work: Path) -> tuple[Any, Any, Any, Any]:
    """(pod cgroups, the syncPod to time, SyncContext, UpdateType) from whichever layout this tree has."""
    config = _find(("agent.apis.config", "AgentConfig"), ("agent.config", "AgentConfig"))(
        node_name="bench",
        manifests=work / "manifests",
        state_dir=work / "state",
        cgroup_root=root,
        device_plugin_dir=None,
        listen="",
    )
    cgroups = _find(("agent.cm.cgroups", "make_pod_cgroups"), ("agent.cgroups", "make_pod_cgroups"))(root)
    # This tree composes the node; b596920 built it as NodeAgent(config, cgroups, sources).
    build = _find(("agent.composition", "compose_node"), ("agent.node", "NodeAgent"))
    agent = build(config, cgroups, [])
    cgroups.start(agent.allocatable())
    sync = agent.syncer.sync_pod if hasattr(agent, "syncer") else agent.sync_pod
    context = _find(("agent.podworkers.types", "SyncContext"), ("agent.podworkers", "SyncContext"))
    update = _find(("agent.podworkers.types", "UpdateType"), ("agent.podworkers", "UpdateType"))
    return cgroups, sync, context, update


def pod_doc(i: int) -> dict[str, object]:
    """agent_bench.py's mix of the three QoS classes; one container with an image only."""
    container: dict[str, object] = {"name": "main", "image": "example/app"}
    if i % 3 == 0:
        container["resources"] = {"limits": {"cpu": "10m", "memory": "16Mi"}}
    elif i % 3 == 1:
        container["resources"] = {"requests": {"cpu": "10m"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"s{i}", "uid": f"sync-{i}"},
            "spec": {"containers": [container]}}  # fmt: skip


def bench(samples_wanted: int) -> list[float]:
    work = Path(tempfile.mkdtemp(prefix="kn-sync-bench-"))
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cgroups, sync, sync_context, update_type = agent_for(root, work)
    ctx = sync_context(threading.Event(), lambda: 30)
    samples = []
    try:
        for i in range(samples_wanted):
            pod = parse_pod(pod_doc(i))
            started = time.perf_counter()
            sync(update_type.CREATE, pod, ctx)
            samples.append(time.perf_counter() - started)
    finally:
        for i in range(samples_wanted):
            cgroups.destroy(f"sync-{i}")
        cgroups.stop_and_remove_root()
        shutil.rmtree(work, ignore_errors=True)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="syncPod calls timed")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("sync_new_pod_bench needs root (real cgroups)", file=sys.stderr)
        return 1
    samples = bench(args.samples)
    report(LABEL, percentile(samples, 50) * 1000, "ms")
    report("agent syncPod new pod p99 (no process start)", percentile(samples, 99) * 1000, "ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
