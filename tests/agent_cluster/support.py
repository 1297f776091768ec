"""Helpers for the agent-in-a-cluster tests: the real agent and device plugin as subprocesses, API reads.

`AgentProcess` runs `kubenode agent --kubeconfig <node kubeconfig> --config <yaml>` with a unique
node name, cgroup root, state, manifest and device-plugin directories, and intervals shortened
through the config file (node status and lease every second, quick retries). It can be killed
(SIGKILL) and started again on the same directories. `close()` stops it and sweeps its cgroup
root, killing whatever pods are left.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubenode.kubeclient import EVENTS, PODS, KubeClient, NotFound
from tests.agent.support import sweep
from tests.agent.support import wait_until as agent_wait_until

REPO = Path(__file__).resolve().parents[2]
_STATUS = re.compile(r"status (127\.0\.0\.1:\d+)")

# Short intervals: the behaviour is the kubelet's, only faster (the defaults are 10 s / 10 s / 5 min).
FAST_SETTINGS: dict[str, Any] = {
    "nodeStatusUpdateFrequency": 1.0,
    "nodeStatusReportFrequency": 60.0,
    "nodeLeaseRenewInterval": 1.0,
    "podStatusResyncInterval": 2.0,
    "apiBackoffMax": 1.0,
    "devicePluginWait": 0.0,
    "crashLoopBackoffInitial": 1.0,
    "housekeepingInterval": 0.5,
}


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """The agent tests' wait_until, where an object not (or no longer) in the API counts as not yet."""

    def present() -> Any:
        try:
            return predicate()
        except NotFound:
            return None

    return agent_wait_until(present, timeout, what, poll=interval)


def pod_body(
    name: str,
    node: str,
    command: str = "sleep 600",
    *,
    resources: dict[str, Any] | None = None,
    restart_policy: str = "Always",
    grace: int = 30,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "command": ["/bin/sh", "-c", command]}
    if resources:
        container["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": grace,
            "containers": [container],
        },
    }


def pod_status(client: KubeClient, name: str) -> dict[str, Any]:
    status: dict[str, Any] = client.get(PODS, name, "default").get("status") or {}
    return status


def phase_is(client: KubeClient, name: str, phase: str) -> dict[str, Any] | None:
    status = pod_status(client, name)
    return status if status.get("phase") == phase else None


def events_for(
    client: KubeClient, name: str, reason: str, namespace: str = "default"
) -> list[dict[str, Any]]:
    page = client.list(EVENTS, namespace, field_selector=f"involvedObject.name={name},reason={reason}")
    return list(page.get("items") or [])


def gone(client: KubeClient, name: str) -> bool:
    try:
        client.get(PODS, name, "default")
    except NotFound:
        return True
    return False


def _terminate(process: subprocess.Popen[str] | None, grace: float) -> None:
    """SIGTERM a running process, and SIGKILL it if it has not exited within `grace` seconds."""
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


class AgentProcess:
    def __init__(
        self, kubeconfig: Path, *, settings: dict[str, Any] | None = None, plugin: bool = False
    ) -> None:
        self.node = f"kn-{uuid.uuid4().hex[:8]}"
        self.root = f"/kn-cluster-{uuid.uuid4().hex[:10]}"
        self.dir = Path(tempfile.mkdtemp(prefix="kn-ac-", dir="/tmp"))
        self.manifests = self.dir / "manifests"
        self.manifests.mkdir()
        self.plugin_dir = self.dir / "dp"
        self.plugin_dir.mkdir()
        self.state = self.dir / "state"
        self.kubeconfig = kubeconfig
        self.config_path = self.dir / "agent.yaml"
        config = {
            "nodeName": self.node,
            "manifests": str(self.manifests),
            "stateDir": str(self.state),
            "cgroupRoot": self.root,
            "devicePluginDir": str(self.plugin_dir),
            "listen": "127.0.0.1:0",
            **FAST_SETTINGS,
            **(settings or {}),
        }
        self.config_path.write_text(yaml.safe_dump(config))
        self.process: subprocess.Popen[str] | None = None
        self.plugin: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.status_address = ""
        self.starts = 0
        self.want_plugin = plugin

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRPC_ENABLE_FORK_SUPPORT": "false"}
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def start(self, timeout: float = 30.0) -> AgentProcess:
        self.status_address = ""
        self.process = process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "--log-level", "INFO", "agent",
             "--kubeconfig", str(self.kubeconfig), "--config", str(self.config_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env(),
            cwd=REPO,
        )  # fmt: skip
        self.starts += 1
        threading.Thread(target=self._read, args=(process,), daemon=True).start()
        wait_until(lambda: self.status_address or process.poll() is not None, timeout, "the agent to start")
        if process.poll() is not None:
            pytest.fail(f"the agent exited with {process.returncode}:\n{self.log()}")
        if self.want_plugin and (self.plugin is None or self.plugin.poll() is not None):
            self.start_plugin()  # after the agent: its device manager clears the directory when it starts
        return self

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.output.append(line)
            match = _STATUS.search(line)
            if match and not self.status_address:
                self.status_address = match.group(1)

    def log(self) -> str:
        return "".join(self.output[-200:])

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://{self.status_address}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def start_plugin(self) -> None:
        self.plugin = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "deviceplugin",
             "--config", str(REPO / "tests/configs/static.yaml"), "--kubelet-dir", str(self.plugin_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.env(),
            cwd=REPO,
        )  # fmt: skip

    def stop_plugin(self) -> None:
        _terminate(self.plugin, grace=10)
        self.plugin = None

    def set_unhealthy(self, *device_ids: str) -> None:
        path = self.plugin_dir / "static-health"
        tmp = self.plugin_dir / ".static-health.tmp"
        tmp.write_text("".join(f"{d}\n" for d in device_ids))
        os.replace(tmp, path)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        _terminate(self.process, grace=15)

    def close(self) -> list[str]:
        """Stop the agent and the plugin, kill every pod, remove the cgroup root and the directories."""
        self.stop()
        self.stop_plugin()
        leftovers = sweep(self.root)
        shutil.rmtree(self.dir, ignore_errors=True)
        return leftovers
