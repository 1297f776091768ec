"""Pods run through the agent on the real cgroup v1 hierarchy: limits, processes, termination."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from agent.cm.cgroups import PodCgroupInfo
from agent.cm.cgroups.v1 import V1_CONTROLLERS
from harness.manifests import write_manifest
from tests.agent.support import MOUNT, Harness, pod_cgroup_dirs, pod_manifest, wait_until

UNLIMITED_V1 = "9223372036854771712"


def cg_file(item: dict[str, object], controller: str, name: str) -> str:
    cgroup = str(item["kubenode"]["cgroup"])  # type: ignore[index]
    return (MOUNT / controller / cgroup.lstrip("/") / name).read_text().strip()


def test_qos_classes_get_the_kubelets_values(make_harness: Callable[..., Harness], manifests: Path) -> None:
    write_manifest(
        manifests, "g.yaml", pod_manifest("guaranteed", resources="{limits: {cpu: 500m, memory: 64Mi}}")
    )
    write_manifest(
        manifests,
        "b.yaml",
        pod_manifest("burstable", resources="{requests: {cpu: 250m, memory: 32Mi}, limits: {cpu: '1'}}"),
    )
    write_manifest(manifests, "be.yaml", pod_manifest("besteffort"))
    h = make_harness().start()
    g, b, be = (h.wait_phase(n, "Running") for n in ("guaranteed", "burstable", "besteffort"))
    assert (g["status"]["qosClass"], b["status"]["qosClass"], be["status"]["qosClass"]) == (
        "Guaranteed",
        "Burstable",
        "BestEffort",
    )
    root = h.config.cgroup_root
    assert g["kubenode"]["cgroup"] == f"{root}/kubepods/pod{g['metadata']['uid']}"
    assert b["kubenode"]["cgroup"] == f"{root}/kubepods/burstable/pod{b['metadata']['uid']}"
    assert be["kubenode"]["cgroup"] == f"{root}/kubepods/besteffort/pod{be['metadata']['uid']}"

    assert cg_file(g, "cpu", "cpu.shares") == "512"
    assert cg_file(g, "cpu", "cpu.cfs_quota_us") == "50000"
    assert cg_file(g, "cpu", "cpu.cfs_period_us") == "100000"
    assert cg_file(g, "memory", "memory.limit_in_bytes") == str(64 * 2**20)
    assert cg_file(g, "pids", "pids.max") == "max"

    assert cg_file(b, "cpu", "cpu.shares") == "256"
    assert cg_file(b, "cpu", "cpu.cfs_quota_us") == "100000"  # every container has a cpu limit
    assert cg_file(b, "memory", "memory.limit_in_bytes") == UNLIMITED_V1  # not every one has a memory limit

    assert cg_file(be, "cpu", "cpu.shares") == "2"
    assert cg_file(be, "cpu", "cpu.cfs_quota_us") == "-1"
    assert cg_file(be, "memory", "memory.limit_in_bytes") == UNLIMITED_V1

    tiers = MOUNT / "cpu" / root.lstrip("/") / "kubepods"
    assert (tiers / "burstable" / "cpu.shares").read_text().strip() == "256"  # sum of burstable cpu requests
    assert (tiers / "besteffort" / "cpu.shares").read_text().strip() == "2"

    # Every container process is inside its own cgroup below its pod cgroup in every hierarchy.
    for item in (g, b, be):
        status = item["status"]["containerStatuses"][0]
        pid, name = str(status["pid"]), status["name"]
        for controller in ("cpu", "cpuacct", "cpuset", "memory", "pids"):
            assert pid in cg_file(item, controller, f"{name}/cgroup.procs").split(), (
                item["metadata"]["name"],
                controller,
            )


def test_cpu_limit_holds_a_busy_loop(make_harness: Callable[..., Harness], manifests: Path) -> None:
    write_manifest(
        manifests,
        "busy.yaml",
        pod_manifest("busy", "while :; do :; done", "{limits: {cpu: 200m, memory: 64Mi}}"),
    )
    h = make_harness().start()
    item = h.wait_phase("busy", "Running")
    uid = item["metadata"]["uid"]
    assert cg_file(item, "cpu", "cpu.cfs_quota_us") == "20000"

    def stat() -> dict[str, int]:
        lines = cg_file(item, "cpu", "cpu.stat").splitlines()
        return {name: int(value) for name, value in (line.split() for line in lines)}

    # Measured against the cgroup's own CFS periods, not the wall clock: however loaded the machine is, in
    # no period may the pod run more than its quota (20 ms of every 100 ms). Counts, not sleeps: wait for
    # the loop to be throttled, then for ten more throttled periods.
    wait_until(lambda: stat()["nr_throttled"] > 0, 60, "the busy loop to hit its quota")
    before, used_before = stat(), h.cgroups.cpu_usage_ns(uid)
    wait_until(lambda: stat()["nr_throttled"] >= before["nr_throttled"] + 10, 120, "ten throttled periods")
    after, used_after = stat(), h.cgroups.cpu_usage_ns(uid)
    periods = after["nr_periods"] - before["nr_periods"]
    used = used_after - used_before
    # One period's quota of slack at each end of the window (it may start and end mid-period).
    assert used <= 20_000_000 * (periods + 2), f"{used / 1e6:.1f} ms of CPU in {periods} periods of 20 ms"
    assert after["throttled_time"] > before["throttled_time"]


def test_removing_the_manifest_kills_processes_and_removes_the_cgroup(
    make_harness: Callable[..., Harness], manifests: Path, cgroup_root: str
) -> None:
    # This one ignores SIGTERM, so it needs the SIGKILL after its (1 s, floored to 2 s) grace period.
    stubborn = pod_manifest("stubborn", "trap '' TERM; while :; do sleep 0.1; done", grace=1)
    path = write_manifest(manifests, "stubborn.yaml", stubborn)
    write_manifest(manifests, "other.yaml", pod_manifest("other"))
    h = make_harness().start()
    pid = h.main_pid("stubborn")
    other_pid = h.main_pid("other")
    assert len(pod_cgroup_dirs(cgroup_root)) == 2 * 5
    removed_at = time.monotonic()
    path.unlink()
    wait_until(lambda: h.pod("stubborn") is None, 10, "the pod to be gone from status")
    assert time.monotonic() - removed_at >= 1.9, "SIGKILL came before the grace period"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert len(pod_cgroup_dirs(cgroup_root)) == 5, "only the other pod's cgroups remain"
    assert psutil.Process(other_pid).is_running()
    assert not (h.config.state_dir / "pods" / "stubborn.json").exists()


def test_bad_manifest_is_reported_and_others_keep_running(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    write_manifest(manifests, "good.yaml", pod_manifest("good"))
    bad = write_manifest(manifests, "bad.yaml", pod_manifest("bad", resources="{limits: {cpu: -2}}"))
    write_manifest(manifests, "junk.json", "{not json")
    h = make_harness().start()
    pid = h.main_pid("good")
    errors = h.agent.status_json()["errors"]
    by_file = {os.path.basename(e["source"]): e for e in errors}
    assert by_file["bad.yaml"]["field"] == "spec.containers[0].resources.limits.cpu"
    assert "greater than or equal to 0" in by_file["bad.yaml"]["message"]
    assert "cannot parse" in by_file["junk.json"]["message"]
    assert h.pod("bad") is None
    # Fixing the file brings the pod up; the good pod was never touched.
    write_manifest(manifests, bad.name, pod_manifest("bad"))
    h.wait_phase("bad", "Running", timeout=5)
    assert h.main_pid("good") == pid
    assert [e for e in h.agent.status_json()["errors"] if "bad.yaml" in e["source"]] == []


def test_pods_that_do_not_fit_are_rejected(make_harness: Callable[..., Harness], manifests: Path) -> None:
    allocatable = {"cpu": 1000, "memory": 2**30, "pods": 110}
    write_manifest(manifests, "fits.yaml", pod_manifest("fits", resources="{requests: {cpu: 600m}}"))
    h = make_harness(allocatable=allocatable).start()
    h.wait_phase("fits", "Running")
    write_manifest(manifests, "big.yaml", pod_manifest("big", resources="{requests: {cpu: 500m}}"))
    write_manifest(manifests, "gpu.yaml", pod_manifest("gpu", resources="{limits: {kubenode.io/gpu: 1}}"))
    big = h.wait_phase("big", "Failed", timeout=5)
    assert big["status"]["reason"] == "OutOfcpu"
    assert "requested: 500m, used: 600m, capacity: 1" in big["status"]["message"]
    gpu = h.wait_phase("gpu", "Failed", timeout=5)
    assert gpu["status"]["reason"] == "OutOfkubenode.io/gpu"
    assert big["kubenode"]["cgroup"] == "" and gpu["kubenode"]["cgroup"] == ""


def test_init_containers_env_and_completion(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path, cgroup_root: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    write_manifest(
        manifests,
        "job.yaml",
        f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: job, namespace: team, labels: {{app: demo}}}}
        spec:
          restartPolicy: Never
          initContainers:
          - name: first
            command: [sh, -c, 'echo first > {out}/order']
          - name: second
            command: [sh, -c, 'echo second >> {out}/order']
          containers:
          - name: main
            workingDir: {out}
            command: [sh, -c]
            args: ['echo "$(GREETING) $POD_NAME $NS $NODE $APP $CPU_MILLI" > env; cat order >> env']
            env:
            - {{name: WHO, value: world}}
            - {{name: GREETING, value: hello-$(WHO)}}
            - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
            - {{name: NS, valueFrom: {{fieldRef: {{fieldPath: metadata.namespace}}}}}}
            - {{name: NODE, valueFrom: {{fieldRef: {{fieldPath: spec.nodeName}}}}}}
            - {{name: APP, valueFrom: {{fieldRef: {{fieldPath: "metadata.labels['app']"}}}}}}
            - name: CPU_MILLI
              valueFrom: {{resourceFieldRef: {{resource: limits.cpu, divisor: 1m}}}}
            resources: {{limits: {{cpu: 300m, memory: 32Mi}}}}
        """,
    )
    h = make_harness().start()
    item = h.wait_phase("job", "Succeeded")
    assert (out / "env").read_text().splitlines() == [
        "hello-world job team testnode demo 300",
        "first",
        "second",
    ]
    states = [
        s["state"] for s in item["status"]["initContainerStatuses"] + item["status"]["containerStatuses"]
    ]
    assert all(s["terminated"]["exitCode"] == 0 for s in states)
    # A finished pod's cgroup is removed; the pod stays visible as Succeeded.
    wait_until(lambda: not pod_cgroup_dirs(cgroup_root), 5, "the finished pod's cgroup to go")
    assert h.pod("job")["status"]["phase"] == "Succeeded"  # type: ignore[index]


def test_manifest_change_replaces_the_pod(make_harness: Callable[..., Harness], manifests: Path) -> None:
    write_manifest(manifests, "web.yaml", pod_manifest("web", "sleep 600"))
    h = make_harness().start()
    first = h.wait_phase("web", "Running")
    write_manifest(manifests, "web.yaml", pod_manifest("web", "sleep 700"))

    def replaced() -> dict[str, object] | None:
        item = h.pod("web")
        same = item is None or item["metadata"]["uid"] == first["metadata"]["uid"]
        return None if same or item["status"]["phase"] != "Running" else item  # type: ignore[index]

    second = wait_until(replaced, 10, "the changed pod to run under a new UID")
    old_pid = first["status"]["containerStatuses"][0]["pid"]
    assert not psutil.pid_exists(old_pid) or psutil.Process(old_pid).status() == psutil.STATUS_ZOMBIE
    assert psutil.Process(second["status"]["containerStatuses"][0]["pid"]).cmdline()[-1] == "sleep 700"


def test_image_only_container_is_not_run(make_harness: Callable[..., Harness], manifests: Path) -> None:
    write_manifest(
        manifests,
        "img.yaml",
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: img}
        spec:
          containers:
          - {name: web, image: nginx}
        """,
    )
    h = make_harness().start()
    # Like a kubelet's pod, it is ContainerCreating until its first sync has judged the container.
    item = wait_until(
        lambda: (
            (p := h.pod("img"))
            and p["status"]["containerStatuses"]
            and p["status"]["containerStatuses"][0]["state"].get("waiting", {}).get("reason")
            != "ContainerCreating"
            and p
        ),
        5,
        "the image-only pod's status past ContainerCreating",
    )
    waiting = item["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "ImageNotSupported"
    assert "nginx" in waiting["message"]
    assert item["status"]["phase"] == "Pending"


def test_a_pod_added_during_housekeeping_is_not_taken_for_an_orphan(
    make_harness: Callable[..., Harness], manifests: Path, cgroup_root: str
) -> None:
    """Pod cgroups are listed before the workers are asked what they know, as HandlePodCleanups does."""
    h = make_harness().start()
    real_list_pods = h.cgroups.list_pods
    hooked = threading.Event()
    listed_after_hook = threading.Event()

    def list_pods_while_a_pod_arrives() -> dict[str, PodCgroupInfo]:
        if hooked.is_set():
            listed_after_hook.set()  # the next housekeeping: the hooked one has finished
        else:
            hooked.set()
            write_manifest(manifests, "late.yaml", pod_manifest("late"))
            wait_until(lambda: pod_cgroup_dirs(cgroup_root), 10, "the new pod's cgroup")
        return real_list_pods()

    h.cgroups.list_pods = list_pods_while_a_pod_arrives  # type: ignore[method-assign]  # inject the arrival
    assert listed_after_hook.wait(15), "housekeeping did not run again"
    item = h.wait_phase("late", "Running")
    assert item["kubenode"]["restarts"] == 0, "the new pod was stopped as an orphan"
    assert len(pod_cgroup_dirs(cgroup_root)) == len(V1_CONTROLLERS)


def test_no_pod_is_added_while_the_workers_learn_the_admitted_pods(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    """sync_known_pods runs under the agent's lock: a source's add (which takes that lock) waits,
    so a pod cannot reach the workers after `admitted` was read and be killed as an orphan."""
    h = make_harness().start()
    real_sync_known_pods = h.agent.workers.sync_known_pods
    called = threading.Event()
    another_thread_got_the_lock: list[bool] = []

    def try_the_lock() -> None:
        got = h.agent.table.lock.acquire(timeout=0)
        if got:
            h.agent.table.lock.release()
        another_thread_got_the_lock.append(got)

    def sync_known_pods(desired: Any) -> Any:
        if not called.is_set():
            probe = threading.Thread(target=try_the_lock)
            probe.start()
            probe.join(5)
            called.set()
        return real_sync_known_pods(desired)

    h.agent.workers.sync_known_pods = sync_known_pods  # type: ignore[method-assign]  # observe the call
    assert called.wait(10), "housekeeping did not run"
    assert another_thread_got_the_lock == [False]
