"""The agent end to end on a real cgroup v2 kernel: real `kubenode agent` and `kubenode deviceplugin`
processes (forked from this warm process, see support.fork_cli), real pods, real cgroup files.

cgroupfs driver: a pod limited to 200m CPU and 64Mi with one `kubenode.io/cpu` from the CPU device
plugin gets cpu.max "20000 100000", its cpu.weight, memory.max, pids.max and exactly its CPU in
cpuset.cpus; its busy loop stays within the quota (cpu.stat); a SIGKILLed agent restarts and
adopts it, removing what went away meanwhile; removing the manifest removes every pod cgroup.

systemd driver: no systemd in the guest, so Delegate=yes is emulated by starting the agent inside
a cgroup it was handed (ancestors' controllers enabled, as systemd does); the agent moves itself
into `supervisor` and builds the kubepods slices beside it; restarted in that leaf (what
DelegateSubgroup=supervisor does), it adopts its pod.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent.cm.cgroups.delegation import SUPERVISOR_LEAF
from agent.cm.cgroups.formulas import milli_cpu_to_shares, shares_to_weight
from agent.cm.devicecgroup.bpf import attached_programs
from kubenode.cgroupsweep import sweep_v2_root
from kubenode.cpuset import format_cpuset, parse_cpuset
from tests.agent.support import free_port, pod_manifest
from tests.cgroup2_guest.conftest import Transcript
from tests.cgroup2_guest.support import (
    GUEST_ENV,
    REPO,
    alive,
    cgroup_dir,
    flat_keyed,
    fork_cli,
    healthy,
    http_json,
    procs,
    read,
    stop_child,
    wait_until,
)

PODS_PIDS_LIMIT = 512
AGENT_SETTINGS = "housekeepingInterval: 0.5\nrelistInterval: 0.2\nmanifestRescanInterval: 2\n"
START_S = 180  # generous: everything runs under emulation, on a host others load too
QUOTA_WINDOW_S = 4.0


def manifest(name: str, command: str, resources: str) -> str:
    return pod_manifest(name, command, resources, grace=2)


@dataclass
class Node:
    """An agent (and optionally the CPU device plugin) on a scratch dir and a cgroup root."""

    work: Path
    root: str
    driver: str = "cgroupfs"
    cgroup_root: str = ""  # --cgroup-root under cgroupfs; default: `root`
    listen: str = field(default_factory=lambda: f"127.0.0.1:{free_port()}")
    agent_pid: int | None = None
    plugin_pid: int | None = None

    def __post_init__(self) -> None:
        for name in ("manifests", "state", "plugins"):
            (self.work / name).mkdir()
        (self.work / "agent.yaml").write_text(AGENT_SETTINGS)

    @property
    def manifests(self) -> Path:
        return self.work / "manifests"

    def start_agent(self, *, devices: bool, cgroup: str | None = None) -> None:
        argv = ["agent", "--config", str(self.work / "agent.yaml"), "--manifests", str(self.manifests)]
        argv += ["--state-dir", str(self.work / "state"), "--node-name", "guest", "--listen", self.listen]
        argv += ["--pod-pids-limit", str(PODS_PIDS_LIMIT), "--cgroup-driver", self.driver]
        argv += ["--device-plugin-dir", str(self.work / "plugins") if devices else "none"]
        if self.driver == "cgroupfs":
            argv += ["--cgroup-root", self.cgroup_root or self.root]
        self.agent_pid = fork_cli(argv, self.work / "agent.log", cgroup)
        wait_until(self._serving, START_S, "the agent's /healthz")

    def _serving(self) -> bool:
        assert self.agent_pid is not None
        if os.waitpid(self.agent_pid, os.WNOHANG)[0]:
            self.agent_pid = None
            pytest.fail(f"the agent exited at start:\n{(self.work / 'agent.log').read_text()[-3000:]}")
        return healthy(self.listen)

    def start_plugin(self) -> None:
        argv = ["deviceplugin", "--config", str(REPO / "tests/configs/cpu.yaml")]
        argv += ["--kubelet-dir", str(self.work / "plugins")]
        self.plugin_pid = fork_cli(argv, self.work / "plugin.log")

    def kill_agent(self, sig: int) -> None:
        assert self.agent_pid is not None
        status = stop_child(self.agent_pid, sig)
        self.agent_pid = None
        if sig == signal.SIGTERM:
            assert os.waitstatus_to_exitcode(status) == 0, (
                f"agent exit status {status} ({self.work}/agent.log)"
            )

    def pods(self) -> dict[str, dict[str, Any]]:
        return {item["metadata"]["name"]: item for item in http_json(self.listen, "/pods")["items"]}

    def running(self, name: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        def check() -> dict[str, Any] | None:
            item = seen["item"] = self.pods().get(name)
            return item if item and item["status"]["phase"] == "Running" else None

        try:
            found: dict[str, Any] = wait_until(check, START_S, f"pod {name} Running")
        except pytest.fail.Exception:
            status = (seen.get("item") or {}).get("status")
            logs = "\n".join(f"--- {log.name}:\n{log.read_text()[-2500:]}" for log in self.work.glob("*.log"))
            pytest.fail(f"pod {name} not Running after {START_S} s; its status: {status}\n{logs}")
        return found

    def pod_cgroups(self) -> list[str]:
        top = cgroup_dir(self.root)
        found = []
        for current, _dirs, _files in os.walk(top):
            name = os.path.basename(current)
            if name.startswith("pod") or "-pod" in name:
                found.append(current)
        return found

    def close(self) -> list[str]:
        for pid in (self.agent_pid, self.plugin_pid):
            if pid is not None:
                stop_child(pid, signal.SIGKILL)
        out = os.environ.get(GUEST_ENV)
        for log in self.work.glob("*.log"):
            if out:  # the host keeps these for a failed run
                shutil.copy(log, Path(out, f"{self.work.name}-{log.name}"))
        shutil.rmtree(self.work, ignore_errors=True)
        return sweep_v2_root(self.root)


@pytest.fixture
def node(transcript: Transcript, warm_imports: None) -> Iterator[Node]:
    work = Path(tempfile.mkdtemp(prefix="kn-guest-", dir="/tmp"))
    made = Node(work, f"/kn-guest-{uuid.uuid4().hex[:10]}")
    yield made
    left = made.close()
    assert not left, f"cgroups leaked: {left}"


def cpu_rate(cgroup: str, window: float) -> tuple[float, dict[str, int]]:
    """CPUs used over `window` seconds, from cpu.stat usage_usec; and the cpu.stat deltas."""
    before, started = flat_keyed(cgroup, "cpu.stat"), time.monotonic()
    time.sleep(window)  # a measurement window, not a wait for an event
    after, elapsed = flat_keyed(cgroup, "cpu.stat"), time.monotonic() - started
    delta = {key: after[key] - before[key] for key in after}
    return delta["usage_usec"] / 1e6 / elapsed, delta


def test_agent_limits_quota_restart_and_cleanup(node: Node, transcript: Transcript) -> None:
    started = time.monotonic()
    node.start_agent(devices=True)
    node.start_plugin()
    (node.manifests / "busy.yaml").write_text(
        manifest("busy", "while :; do :; done", "{limits: {cpu: 200m, memory: 64Mi, kubenode.io/cpu: 1}}")
    )
    (node.manifests / "drop.yaml").write_text(manifest("drop", "sleep 600", "{}"))
    busy = node.running("busy")
    drop = node.running("drop")
    cgroup = busy["kubenode"]["cgroup"]
    pid = busy["status"]["containerStatuses"][0]["pid"]
    transcript.line(f"agent + CPU plugin up, pods Running after {time.monotonic() - started:.1f} s")

    # The pod cgroup's files, as the kernel shows them.
    assert busy["status"]["qosClass"] == "Guaranteed"
    assert cgroup == f"{node.root}/kubepods/pod{busy['metadata']['uid']}"
    allocated = parse_cpuset(busy["kubenode"]["cpuset"])
    assert len(allocated) == 1
    files = {
        name: read(cgroup, name)
        for name in (
            "cpu.max",
            "cpu.weight",
            "memory.max",
            "pids.max",
            "cpuset.cpus",
            "cpuset.cpus.effective",
        )
    }
    assert files["cpu.max"] == "20000 100000"
    assert files["cpu.weight"] == str(shares_to_weight(milli_cpu_to_shares(200)))
    assert files["memory.max"] == str(64 << 20)
    assert files["pids.max"] == str(PODS_PIDS_LIMIT)
    assert parse_cpuset(files["cpuset.cpus"]) == allocated
    assert parse_cpuset(files["cpuset.cpus.effective"]) == allocated
    assert procs(cgroup) == set()  # the pod cgroup holds its containers' cgroups, no process of its own
    assert procs(f"{cgroup}/main") == {pid}
    assert os.sched_getaffinity(pid) == allocated
    for name, value in files.items():
        transcript.line(f"  {cgroup}/{name}: {value}")

    # The busy loop is held to 200m by the kernel.
    rate, stat = cpu_rate(cgroup, QUOTA_WINDOW_S)
    transcript.line(
        f"busy loop under cpu.max 20000 100000: {rate:.3f} CPU over {QUOTA_WINDOW_S:.0f} s "
        f"(cpu.stat: {stat['nr_periods']} periods, {stat['nr_throttled']} throttled)"
    )
    assert 0 < rate <= 0.22
    assert stat["nr_throttled"] > 0, "the busy loop was never throttled: is the quota enforced?"

    # Every CPU handed out exclusively: the shared pod falls back to all of them, on a running cgroup.
    drop_cgroup = drop["kubenode"]["cgroup"]
    others = set(range(os.cpu_count() or 1)) - allocated
    wait_until(lambda: parse_cpuset(read(drop_cgroup, "cpuset.cpus")) == others, START_S, "shared: others")
    pin2 = node.manifests / "pin2.yaml"
    pin2.write_text(manifest("pin2", "sleep 600", "{limits: {kubenode.io/cpu: 1}}"))
    assert parse_cpuset(node.running("pin2")["kubenode"]["cpuset"]) == others
    every = allocated | others
    wait_until(
        lambda: parse_cpuset(read(drop_cgroup, "cpuset.cpus.effective")) == every, START_S, "shared: all"
    )
    assert node.pods()["drop"]["status"]["phase"] == "Running"
    pin2.unlink()
    wait_until(lambda: "pin2" not in node.pods(), START_S, "pin2 removed")
    wait_until(lambda: parse_cpuset(read(drop_cgroup, "cpuset.cpus")) == others, START_S, "shared: others")
    shared, all_cpus = format_cpuset(others), format_cpuset(every)
    transcript.line(
        f"shared pod's cpuset.cpus as CPUs are pinned and freed: {shared} -> {all_cpus} -> {shared}"
    )

    # SIGKILL the agent; while it is down one manifest goes and a stray pod cgroup appears.
    node.kill_agent(signal.SIGKILL)
    assert alive(pid), "the pod must survive its agent"
    (node.manifests / "drop.yaml").unlink()
    stray = cgroup_dir(f"{node.root}/kubepods/besteffort/pod0123456789abcdef")
    stray.mkdir()
    node.start_agent(devices=True)
    adopted = node.running("busy")
    assert adopted["status"]["containerStatuses"][0]["pid"] == pid, "restarted instead of adopted"
    assert adopted["status"]["containerStatuses"][0]["restartCount"] == 0
    assert parse_cpuset(adopted["kubenode"]["cpuset"]) == allocated
    drop_pid = drop["status"]["containerStatuses"][0]["pid"]
    wait_until(lambda: not alive(drop_pid), START_S, "the removed pod's process to stop")
    wait_until(lambda: node.pod_cgroups() == [str(cgroup_dir(cgroup))], START_S, "only busy's cgroup left")
    assert set(node.pods()) == {"busy"}
    programs = attached_programs(cgroup_dir(f"{cgroup}/main"))
    assert len(programs) == 1, programs  # its container cgroup's device program, one after the restart
    transcript.line(
        "SIGKILL + restart: busy adopted (same pid, 0 restarts, same CPU, one device program); drop and a "
        "stray removed"
    )

    # Removing the manifest removes the pod and every pod cgroup.
    (node.manifests / "busy.yaml").unlink()
    wait_until(lambda: not alive(pid), START_S, "the pod's process to stop")
    wait_until(lambda: not node.pod_cgroups(), START_S, "every pod cgroup removed")
    node.kill_agent(signal.SIGTERM)
    left = sorted(os.path.relpath(d, cgroup_dir(node.root)) for d, _s, _f in os.walk(cgroup_dir(node.root)))
    assert left == [".", "kubepods", "kubepods/besteffort", "kubepods/burstable"]
    transcript.line(
        f"manifest removed: no pod cgroup left (tiers only); e2e took {time.monotonic() - started:.1f} s"
    )


def test_systemd_driver_in_a_delegated_subtree(node: Node, transcript: Transcript) -> None:
    """Delegate=yes, emulated: the agent is started inside the cgroup it is handed."""
    node.driver = "systemd"
    handed = f"{node.root}/system.slice/kubenode-agent.service"
    cgroup_dir(handed).mkdir(parents=True)
    # systemd enables the controllers down to a delegated unit's cgroup; the rest is the agent's.
    for ancestor in ("/", node.root, f"{node.root}/system.slice"):
        (cgroup_dir(ancestor) / "cgroup.subtree_control").write_text("+cpu +cpuset +memory +pids")
    (node.manifests / "web.yaml").write_text(
        manifest("web", "sleep 600", "{requests: {cpu: 100m}, limits: {memory: 32Mi}}")
    )
    node.start_agent(devices=False, cgroup=handed)
    web = node.running("web")
    uid_ = web["metadata"]["uid"].replace("-", "_")
    expected = f"{handed}/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice"
    assert web["kubenode"]["cgroup"] == expected
    pid = web["status"]["containerStatuses"][0]["pid"]
    assert pid in procs(f"{expected}/kubenode-main.scope")  # sh and its sleep, in the container's cgroup
    assert read(expected, "memory.max") == str(32 << 20)
    assert read(expected, "cpu.weight") == str(shares_to_weight(milli_cpu_to_shares(100)))
    # The agent left its handed cgroup for the supervisor leaf, so that cgroup may have children.
    assert node.agent_pid is not None
    agent_cgroup = Path(f"/proc/{node.agent_pid}/cgroup").read_text().strip()
    assert agent_cgroup == f"0::{handed}/{SUPERVISOR_LEAF}"
    assert procs(handed) == set()
    assert {"cpu", "cpuset", "memory", "pids"} <= set(read(handed, "cgroup.subtree_control").split())
    layout = sorted(os.listdir(cgroup_dir(handed)))
    slices = [name for name in layout if name.endswith(".slice") or name == SUPERVISOR_LEAF]
    transcript.line(f"systemd driver, delegated: {handed.split('/', 2)[2]} holds {slices}")
    transcript.line(f"  agent: {agent_cgroup}; pod: .../{expected.rsplit('/', 1)[1]}")

    # Restarted by the service manager into its leaf (DelegateSubgroup=supervisor): the pod is adopted.
    node.kill_agent(signal.SIGKILL)
    node.start_agent(devices=False, cgroup=f"{handed}/{SUPERVISOR_LEAF}")
    again = node.running("web")
    assert again["status"]["containerStatuses"][0]["pid"] == pid
    assert again["kubenode"]["cgroup"] == expected
    (node.manifests / "web.yaml").unlink()
    wait_until(lambda: not node.pod_cgroups(), START_S, "the pod's slice removed")
    node.kill_agent(signal.SIGTERM)
    transcript.line(
        "systemd driver: restart in the supervisor leaf adopted the pod; its slice removed with it"
    )


def test_cgroupfs_driver_rooted_at_its_own_delegated_cgroup(node: Node, transcript: Transcript) -> None:
    """docs/cgroups.md's advice for cgroupfs on a systemd host: Delegate=yes, --cgroup-root = that subtree.

    The agent then runs in the cgroup that becomes kubepods' parent: on v2 it must leave it for the
    supervisor leaf first, or enabling controllers there fails (EBUSY) and the agent cannot start.
    """
    handed = f"{node.root}/kubenode-agent.service"
    cgroup_dir(handed).mkdir(parents=True)
    for ancestor in ("/", node.root):
        (cgroup_dir(ancestor) / "cgroup.subtree_control").write_text("+cpu +cpuset +memory +pids")
    node.cgroup_root = handed
    (node.manifests / "db.yaml").write_text(
        manifest("db", "sleep 600", "{limits: {cpu: 100m, memory: 32Mi}}")
    )
    node.start_agent(devices=False, cgroup=handed)
    db = node.running("db")
    assert db["kubenode"]["cgroup"] == f"{handed}/kubepods/pod{db['metadata']['uid']}"
    assert read(db["kubenode"]["cgroup"], "cpu.max") == "10000 100000"
    assert node.agent_pid is not None
    agent_cgroup = Path(f"/proc/{node.agent_pid}/cgroup").read_text().strip()
    assert agent_cgroup == f"0::{handed}/{SUPERVISOR_LEAF}"
    assert procs(handed) == set()
    (node.manifests / "db.yaml").unlink()
    wait_until(lambda: not node.pod_cgroups(), START_S, "the pod cgroup removed")
    node.kill_agent(signal.SIGTERM)
    transcript.line(
        f"cgroupfs driver, --cgroup-root = its own delegated cgroup: agent in {SUPERVISOR_LEAF}, pod ran"
    )
