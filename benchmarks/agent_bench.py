"""Node agent figures on this machine's real cgroups, v1 or v2 as the agent detects them (needs root).

Prints:
- syncPod for a new pod (QoS class, QoS tiers, pod cgroup and limits, pod record; no process start: the
  pods' containers have only an image, so syncPod does everything up to starting processes) p50/p99;
- the CPU time of those syncs per pod (the whole process: the record committer's thread included);
- 110 pods from cold (agent start, manifests already in the directory) to all pod cgroups in place and
  every pod's record on disk (the agent's group commit flushed), seen by an observer of the syncs;
- the floor for the same: the raw mkdir/write calls that make 110 pod cgroups with their limits, and one
  durable record per pod (a temporary file written and fsynced, renamed over the record, the directory
  fsynced), as issue 23 defines it (the files are the host's version's: benchmarks/cgroupfloor.py);
- the ratio of the two;
- 110 pods from cold to all processes running, its floor (the same pod cgroups and records, and per pod
  its container's cgroup with its limits and device rules, as issue 37 makes them, and its process
  started in them: a plain fork, the cgroups joined, exec) and the ratio;
- the RSS of a real `kubenode agent` process running 110 pods.
Every cgroup, process and file it makes is removed at the end.

    .venv/bin/python benchmarks/agent_bench.py [--pods 110] [--samples 200] [--deadline 60]

Smaller sizes are for the cgroup v2 guest under emulation (benchmarks/cgroup2_guest_bench.py); the labels
name the pod count.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from benchstats import percentile, report, rss_mib
from cgroupfloor import PodLimits, RawCgroups

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # harness/ lives at the repository root

from agent.apis.config import AgentConfig
from agent.cm.cgroups import make_pod_cgroups
from agent.composition import compose_node
from agent.config.sources import ManifestSource
from agent.kuberuntime.processes import join_cgroup
from agent.podworkers.types import SyncContext, UpdateType
from harness.cgroupfs import sweep_root
from kubenode.model import parse_pod

PODS = 110
SYNC_SAMPLES = 200
COLD_DEADLINE_S = 60  # benchmarks/cgroup2_guest_bench.py raises it: emulation is ~100x slower
# The floor's pod: a Guaranteed 10m / 32Mi pod's shares, quota and memory limit.
FLOOR_LIMITS = PodLimits(shares=102, quota_us=10000, memory=32 * 2**20)
# The running floor's pods follow pod_doc's mix, whose pods' and containers' limits are the same: a Guaranteed
# 10m / 16Mi pod, a Burstable 10m request, a BestEffort one (its process is throttled like the agent's).
RUNNING_FLOOR_LIMITS = (
    PodLimits(shares=10, quota_us=1000, memory=16 * 2**20),
    PodLimits(shares=10, quota_us=-1, memory=-1),
    PodLimits(shares=2, quota_us=-1, memory=-1),
)


def pod_doc(i: int, *, run: bool) -> dict[str, object]:
    container: dict[str, object] = {"name": "main", "image": "example/app"}
    if run:
        container["command"] = ["sleep", "infinity"]
    # A mix of the three QoS classes, as on a real node.
    if i % 3 == 0:
        container["resources"] = {"limits": {"cpu": "10m", "memory": "16Mi"}}
    elif i % 3 == 1:
        container["resources"] = {"requests": {"cpu": "10m"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p{i}"},
        "spec": {"containers": [container]},
    }


def sweep(root: str) -> None:
    left = sweep_root(root, attempts=100, retry_delay=0.01)
    if left:
        print(f"warning: could not remove {left}", file=sys.stderr)


def config(root: str, work: Path, listen: str = "") -> AgentConfig:
    return AgentConfig(
        node_name="bench",
        manifests=work / "manifests",
        state_dir=work / "state",
        cgroup_root=root,
        device_plugin_dir=None,
        listen=listen,
        relist_interval=0.05,
    )


def bench_sync_pod(work: Path, samples_wanted: int = SYNC_SAMPLES) -> tuple[list[float], float]:
    """Each syncPod's wall time, and the process CPU seconds per sync (records made durable included)."""
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cgroups = make_pod_cgroups(root)
    agent = compose_node(config(root, work / "sync"), cgroups, [])
    cgroups.start(agent.allocatable())
    ctx = SyncContext(threading.Event(), lambda: 30)
    samples = []
    try:
        cpu_started = time.process_time()
        for i in range(samples_wanted):
            pod = parse_pod({**pod_doc(i, run=False), "metadata": {"name": f"s{i}", "uid": f"sync-{i}"}})
            started = time.perf_counter()
            agent.syncer.sync_pod(UpdateType.CREATE, pod, ctx)
            samples.append(time.perf_counter() - started)
        agent.store.flush()
        cpu = (time.process_time() - cpu_started) / samples_wanted
    finally:
        for i in range(samples_wanted):
            cgroups.destroy(f"sync-{i}")
        cgroups.stop_and_remove_root()
        sweep(root)
    return samples, cpu


def write_manifests(directory: Path, *, run: bool, pods: int = PODS) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(pods):
        (directory / f"p{i}.json").write_text(json.dumps(pod_doc(i, run=run)))


def bench_cold(work: Path, *, run: bool, pods: int = PODS, deadline: float = COLD_DEADLINE_S) -> float:
    """Seconds from agent start to all pod cgroups in place, or (run=True) all processes running."""
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cfg = config(root, work / f"cold-{run}")
    write_manifests(cfg.manifests, run=run, pods=pods)
    cgroups = make_pod_cgroups(root)
    agent = compose_node(cfg, cgroups, [ManifestSource(cfg.manifests, cfg.node_name)])
    # Told after each pod's sync: the clock is not read by a poll that takes the agent's lock every few
    # ms (all the pods' status views each time) while the pods are being made; the views are checked after.
    created: set[str] = set()
    all_created = threading.Event()

    def synced(uid: str, operation: str, seconds: float | None) -> None:
        if operation == "create" and seconds is not None:
            created.add(uid)
            if len(created) >= pods:
                all_created.set()

    if not run:
        agent.observers.append(synced)
    started = time.perf_counter()
    agent.start()
    try:
        if not run:
            all_created.wait(deadline)
        while True:
            views = agent.views.pods()
            if run:
                done = len(views) == pods and all(v.record.phase == "Running" for v in views)
            else:
                done = len(views) == pods and all(v.record.cgroup for v in views)
            if done:
                agent.store.flush()  # the floor's records are durable too
                return time.perf_counter() - started
            if time.perf_counter() - started > deadline:
                raise SystemExit(f"{pods} pods did not come up within {deadline:.0f} s")
            time.sleep(0.002)
    finally:
        agent.stop(terminate_pods=True)
        cgroups.stop_and_remove_root()
        sweep(root)


def bench_floor(work: Path, pods: int = PODS, *, running: bool = False) -> float:
    """The same pod cgroups with limits by plain mkdir and write calls, and a durable record per pod;
    `running`: with pod_doc's limits, each pod's container cgroup too, with its limits and device rules,
    and its process started in it (forked, the cgroups joined before exec, as any start that never runs
    outside its limits), each start on its own thread so the waits for the execs overlap."""
    root = f"kn-floor-{uuid.uuid4().hex[:8]}"
    raw = RawCgroups()
    records = work / f"floor-records-{running}"
    records.mkdir()
    # A pod record as the agent writes one for these pods (one container, waiting), about 700 bytes.
    record = json.dumps({"uid": "0" * 36, "containers": {"main": {"reason": "ContainerCreating" * 30}}})
    processes: list[subprocess.Popen[bytes]] = []
    starts: list[threading.Thread] = []
    started = time.perf_counter()
    try:
        raw.make_tier(f"{root}/kubepods")
        for i in range(pods):
            limits = RUNNING_FLOOR_LIMITS[i % 3] if running else FLOOR_LIMITS
            raw.make_pod(f"{root}/kubepods/pod{i}", limits, kernel_defaults=True)
            if running:
                raw.make_container(f"{root}/kubepods/pod{i}/main", limits)
                # Each start on its own thread, as the agent's pod workers start theirs: a process that
                # joined a 10m quota (1 ms per 100 ms) execs under it, and where an exec costs more than
                # 1 ms of CPU (the emulated guest) its wait must overlap the next pods', not add to them.
                procs_files = raw.procs_files(f"{root}/kubepods/pod{i}/main")
                start = threading.Thread(target=lambda files=procs_files: processes.append(_start_in(files)))
                start.start()
                starts.append(start)
            durable_record(records / f"pod{i}.json", record.encode())
        for start in starts:
            start.join()
        if running and len(processes) != pods:
            raise SystemExit(f"the running floor started {len(processes)} of {pods} processes (see above)")
        return time.perf_counter() - started
    finally:
        for start in starts:
            start.join()
        raw.remove(root)  # kills the processes
        for process in processes:
            process.wait()


def _start_in(procs_files: list[Path]) -> subprocess.Popen[bytes]:
    files = [str(path) for path in procs_files]
    return subprocess.Popen(
        ["sleep", "infinity"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
        preexec_fn=lambda: join_cgroup(files),  # the bare open/write of each cgroup.procs
    )  # fmt: skip


def durable_record(path: Path, data: bytes) -> None:
    """Write, fsync, rename over `path`, fsync the directory: one record that survives a power loss."""
    temporary = path.with_name(f".tmp-{path.name}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def bench_agent_rss(work: Path, pods: int = PODS, deadline_s: float = COLD_DEADLINE_S) -> float:
    """RSS (MiB) of a real `kubenode agent` process once it runs the pods with processes."""
    root = f"/kn-bench-{uuid.uuid4().hex[:8]}"
    cfg = config(root, work / "rss")
    write_manifests(cfg.manifests, run=True, pods=pods)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        listen = f"127.0.0.1:{s.getsockname()[1]}"
    argv = [sys.executable, "-m", "cli.main", "--log-level", "WARNING", "agent", "--manifests"]
    argv += [str(cfg.manifests), "--state-dir", str(cfg.state_dir), "--cgroup-root", root]
    argv += ["--device-plugin-dir", "none", "--node-name", "bench", "--listen", listen]
    proc = subprocess.Popen(argv, cwd=Path(__file__).resolve().parents[1])
    try:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(f"http://{listen}/pods", timeout=2) as response:
                    items = json.loads(response.read())["items"]
                if len(items) == pods and all(i["status"]["phase"] == "Running" for i in items):
                    time.sleep(1.0)  # let the agent settle into its steady state
                    return float(rss_mib(proc.pid))
            time.sleep(0.2)
        raise SystemExit(f"the agent did not run {pods} pods within {deadline_s:.0f} s")
    finally:
        proc.kill()
        proc.wait()
        sweep(root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=PODS, help="pods of the cold starts and the RSS")
    parser.add_argument("--samples", type=int, default=SYNC_SAMPLES, help="syncPod calls timed")
    parser.add_argument("--deadline", type=float, default=COLD_DEADLINE_S, help="seconds a cold start takes")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("agent_bench needs root (real cgroups)", file=sys.stderr)
        return 1
    n = args.pods
    work = Path(tempfile.mkdtemp(prefix="kn-agent-bench-"))
    try:
        samples, cpu = bench_sync_pod(work, args.samples)
        report(
            "agent syncPod new pod p50 (no process start)", percentile(samples, 50) * 1000, "ms", "<= 5 ms"
        )
        report("agent syncPod new pod p99 (no process start)", percentile(samples, 99) * 1000, "ms")
        report("agent syncPod new pod CPU per sync (process)", cpu * 1000, "ms")
        cold = bench_cold(work, run=False, pods=n, deadline=args.deadline)
        report(f"agent {n} pods cold -> all pod cgroups in place", cold, "s", "<= 2 s" if n == PODS else "")
        floor = bench_floor(work, n)
        report(f"raw mkdir/write floor for {n} pod cgroups", floor, "s")
        report("agent / floor ratio", cold / floor, "x", "<= 3 x")
        running = bench_cold(work, run=True, pods=n, deadline=args.deadline)
        report(f"agent {n} pods cold -> all processes running", running, "s")
        running_floor = bench_floor(work, n, running=True)
        report(f"raw floor for {n} running pods (pod, container cgroups, devices)", running_floor, "s")
        report("agent running / floor ratio", running / running_floor, "x", "<= 3 x")
        rss = bench_agent_rss(work, n, args.deadline)
        report(f"agent RSS with {n} running pods", rss, "MiB", "<= 80 MiB" if n == PODS else "")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
