"""`AgentProcess`: the real `kubenode agent` (and optionally the static device plugin) as subprocesses.

`AgentProcess(kubeconfig)` runs `kubenode agent --kubeconfig <node kubeconfig> --config <yaml>` with a unique
node name, cgroup root, state, manifest and device-plugin directories, and intervals shortened through the
config file (node status and lease every second, quick retries). It can be killed (SIGKILL) and started again
on the same directories. `close()` stops it and sweeps its cgroup root, killing whatever pods are left.
Used by the tests and the benchmarks alike, so it needs nothing but the project and its runtime dependencies.
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
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Protocol

import yaml

from agent.volumemanager.mountutil import unmount_all_under
from harness.cgroupfs import sweep_root

REPO = Path(__file__).resolve().parents[1]
_STATUS = re.compile(r"status (\d+\.\d+\.\d+\.\d+:\d+)")  # where `listen` put it (loopback by default)

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
        self,
        kubeconfig: Path,
        *,
        settings: dict[str, Any] | None = None,
        plugin: bool = False,
        plugin_config: Path = REPO / "tests/configs/static.yaml",
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
            # Its own, not the default /var/lib/kubenode/plugins_registry every agent on the host would share.
            "pluginsRegistryDir": str(self.dir / "plugins_registry"),
            # and its own CDI directory beside the host's, where a DRA driver started for it writes its
            # claims' specs (the agent resolves a process pod's CDI IDs there, as containerd does in its own)
            "cdiSpecDirs": ["/etc/cdi", "/var/run/cdi", str(self.dir / "cdi")],
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
        self.plugin_config = plugin_config

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRPC_ENABLE_FORK_SUPPORT": "false"}
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def start(self, timeout: float = 90.0) -> AgentProcess:
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
        deadline = time.monotonic() + timeout
        while not self.status_address and process.poll() is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the agent did not start within {timeout} s:\n{self.log()}")
            time.sleep(0.05)
        if process.poll() is not None:
            raise RuntimeError(f"the agent exited with {process.returncode}:\n{self.log()}")
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
             "--config", str(self.plugin_config), "--kubelet-dir", str(self.plugin_dir)],
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
        leftovers = sweep_root(self.root)
        # The pods' volumes stay when an agent stops (a restarted one adopts them): unmount them here.
        unmount_all_under(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        return leftovers


class _Closable(Protocol):
    def close(self) -> None: ...


def close_reporting_leaks(agent: AgentProcess, *others: _Closable) -> int:
    """A benchmark's teardown: close the agent, then the others (clients); name on stderr any cgroup the
    agent left behind. The script's exit status: 1 if it left any (a leak fails the run), else 0."""
    try:
        leaks = agent.close()
    finally:
        for other in others:
            other.close()
    if leaks:
        print(f"cgroups left behind: {leaks}", file=sys.stderr)
        return 1
    return 0
