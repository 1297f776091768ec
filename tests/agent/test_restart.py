"""SIGKILL a real `kubenode agent` process and restart it: running pods are adopted and nothing leaks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent.cm.cgroups.v1 import V1_CONTROLLERS
from harness.manifests import write_manifest
from harness.threadsignal import tgkill, thread_taking
from tests.agent.support import MOUNT, free_port, pod_cgroup_dirs, pod_manifest, wait_until

REPO = Path(__file__).resolve().parents[2]


class AgentProcess:
    def __init__(self, manifests: Path, state: Path, root: str) -> None:
        self.listen = f"127.0.0.1:{free_port()}"
        self.argv = [
            sys.executable,
            "-m",
            "cli.main",
            "agent",
            "--manifests",
            str(manifests),
            "--state-dir",
            str(state),
            "--cgroup-root",
            root,
            "--device-plugin-dir",
            "none",
            "--node-name",
            "testnode",
            "--listen",
            self.listen,
        ]
        self.log = state.parent / "agent.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=REPO, stdout=log, stderr=log)
        wait_until(self._healthy, 15, f"the agent to serve /healthz (log: {self.log})")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.listen}/healthz", timeout=1) as r:
                return bool(r.read() == b"ok")
        except OSError:
            return False

    def pods(self) -> dict[str, dict[str, Any]]:
        with urllib.request.urlopen(f"http://{self.listen}/pods", timeout=5) as r:
            return {item["metadata"]["name"]: item for item in json.loads(r.read())["items"]}

    def running_pid(self, name: str) -> int:
        def check() -> int | None:
            item = self.pods().get(name)
            if item and item["status"]["phase"] == "Running":
                return int(item["status"]["containerStatuses"][0]["pid"])
            return None

        return int(wait_until(check, 10, f"pod {name} running"))

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(15)


@pytest.fixture
def agent_process(manifests: Path, tmp_path: Path, cgroup_root: str) -> Iterator[AgentProcess]:
    agent = AgentProcess(manifests, tmp_path / "state", cgroup_root)
    yield agent
    if agent.proc is not None and agent.proc.poll() is None:
        agent.kill()


def alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def test_sigkill_and_restart_adopts_running_pods(
    agent_process: AgentProcess, manifests: Path, cgroup_root: str
) -> None:
    write_manifest(
        manifests, "keep.yaml", pod_manifest("keep", resources="{limits: {cpu: 300m, memory: 64Mi}}")
    )
    drop = write_manifest(manifests, "drop.yaml", pod_manifest("drop"))
    agent_process.start()
    keep_pid = agent_process.running_pid("keep")
    drop_pid = agent_process.running_pid("drop")

    agent_process.kill(signal.SIGKILL)
    assert alive(keep_pid) and alive(drop_pid), "pods must survive the agent"
    # While the agent is down: one manifest goes away, and a stray pod cgroup appears.
    drop.unlink()
    stray = f"{cgroup_root.lstrip('/')}/kubepods/besteffort/pod0123456789abcdef"
    for controller in V1_CONTROLLERS:
        os.makedirs(MOUNT / controller / stray)

    agent_process.start()
    assert agent_process.running_pid("keep") == keep_pid, "the running pod was restarted instead of adopted"
    wait_until(lambda: not alive(drop_pid), 10, "the unwanted pod's process to be stopped")
    wait_until(lambda: len(pod_cgroup_dirs(cgroup_root)) == len(V1_CONTROLLERS), 10, "orphan cgroups removed")
    keep = agent_process.pods()["keep"]
    assert keep["status"]["containerStatuses"][0]["restartCount"] == 0
    assert set(agent_process.pods()) == {"keep"}
    # The adopted pod is still managed: removing its manifest stops it and removes its cgroup.
    (manifests / "keep.yaml").unlink()
    wait_until(lambda: not alive(keep_pid), 10, "the adopted pod's process to be stopped")
    wait_until(lambda: not pod_cgroup_dirs(cgroup_root), 10, "every pod cgroup removed")
    agent_process.kill(signal.SIGTERM)
    assert agent_process.proc is not None and agent_process.proc.returncode == 0


def test_a_sigterm_taken_by_another_thread_stops_the_agent_at_once(agent_process: AgentProcess) -> None:
    # The kernel hands a process's SIGTERM to another thread when the main one already has a signal pending
    # (a pod's SIGCHLD): the agent once slept on until its watchdog tick, an hour, or a SIGKILL.
    agent_process.start()
    assert agent_process.proc is not None
    pid = agent_process.proc.pid
    tgkill(pid, thread_taking(pid, signal.SIGTERM), signal.SIGTERM)
    assert agent_process.proc.wait(10) == 0
