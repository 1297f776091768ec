"""What volumes add to syncPod, on this machine's real cgroups and mounts (needs root).

Prints syncPod p50 for a new pod with 3 ConfigMap/Secret volumes (a configMap, a secret and a projected
volume of both: the payloads, the atomic writer, the tmpfs mounts of the secret and projected volumes)
against the same pod without volumes, measured alternately in the same run, and their ratio; then the
same for a resync of those pods (the payload compared, nothing written). The pods' containers have only
an image, so syncPod does everything up to starting processes (as benchmarks/agent_bench.py). The
ConfigMap and Secret come from an in-memory fetch behind the agent's TTL cache, so the API server's GET
is not in the figure. Every cgroup, mount and file it makes is removed at the end.
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_bench import config, sweep
from benchstats import percentile, report

from agent.cm.cgroups import make_pod_cgroups
from agent.composition import compose_node
from agent.podworkers.types import SyncContext, UpdateType
from agent.util.configobjects import CONFIGMAPS, CachedConfigObjects
from agent.volumemanager.mountutil import unmount_all_under
from kubenode.model import parse_pod

SAMPLES = 100

OBJECTS: dict[str, dict[str, Any]] = {
    CONFIGMAPS: {
        "metadata": {"name": "app", "namespace": "default"},
        "data": {"app.conf": "level=info\n" * 20, "greeting": "hello"},
    },
    "secrets": {
        "metadata": {"name": "creds", "namespace": "default"},
        "data": {
            "password": base64.b64encode(b"s3cret").decode(),
            "token": base64.b64encode(b"t" * 64).decode(),
        },
    },
}


def fetch(resource: str, namespace: str, name: str) -> Mapping[str, Any] | None:
    return OBJECTS[resource]


def pod_doc(i: int, *, volumes: bool) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "example/app"}
    spec: dict[str, Any] = {"containers": [container]}
    if volumes:
        container["volumeMounts"] = [
            {"name": "config", "mountPath": "/etc/app"},
            {"name": "secret", "mountPath": "/etc/creds"},
            {"name": "both", "mountPath": "/etc/both"},
        ]
        spec["volumes"] = [
            {"name": "config", "configMap": {"name": "app"}},
            {"name": "secret", "secret": {"secretName": "creds"}},
            {
                "name": "both",
                "projected": {"sources": [{"configMap": {"name": "app"}}, {"secret": {"name": "creds"}}]},
            },
        ]
    kind = "v" if volumes else "n"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{kind}{i}", "uid": f"vol-{kind}-{i}"},
        "spec": spec,
    }


def bench(work: Path) -> dict[str, list[float]]:
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cgroups = make_pod_cgroups(root)
    objects = CachedConfigObjects(fetch, ttl=60.0)
    agent = compose_node(config(root, work), cgroups, [], objects=objects)
    cgroups.start(agent.allocatable())
    ctx = SyncContext(threading.Event(), lambda: 30)
    samples: dict[str, list[float]] = {"new": [], "new+volumes": [], "resync": [], "resync+volumes": []}
    uids = []
    try:
        for i in range(SAMPLES):
            for volumes in (False, True):  # alternated, so load changes hit both alike
                pod = parse_pod(pod_doc(i, volumes=volumes))
                uids.append(pod.uid)
                suffix = "+volumes" if volumes else ""
                for update, key in ((UpdateType.CREATE, "new"), (UpdateType.SYNC, "resync")):
                    started = time.perf_counter()
                    agent.syncer.sync_pod(update, pod, ctx)
                    samples[key + suffix].append(time.perf_counter() - started)
    finally:
        for uid in uids:
            cgroups.destroy(uid)
            agent.volumes.unmount_pod(uid)
        cgroups.stop_and_remove_root()
        sweep(root)
        unmount_all_under(work)
    return samples


def main() -> int:
    if os.geteuid() != 0:
        print("volume_bench needs root (real cgroups and mounts)", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="kn-volume-bench-"))
    try:
        samples = bench(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    p50 = {key: percentile(values, 50) * 1000 for key, values in samples.items()}
    report("syncPod new pod p50, no volumes", p50["new"], "ms")
    report("syncPod new pod p50, 3 ConfigMap/Secret volumes", p50["new+volumes"], "ms")
    report("volumes / no volumes (new pod)", p50["new+volumes"] / p50["new"], "x")
    report("syncPod resync p50, no volumes", p50["resync"], "ms")
    report("syncPod resync p50, 3 ConfigMap/Secret volumes", p50["resync+volumes"], "ms")
    report("volumes / no volumes (resync)", p50["resync+volumes"] / p50["resync"], "x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
