"""A one-machine cluster of real processes for the workload controller tests.

`Cluster` holds the API server, the scheduler, real agents (each runs its pods' commands as processes
in cgroups) and `kubenode controller-manager`, and the real kubectl with its own cache. Agents are
added with `add_agent()` (a node joining); everything is stopped and swept by `close()`.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.controllermanager import ControllerManagerProcess
from kubenode.kubeclient import PODS, KubeClient, load_kubeconfig
from tests.apiserver.kubectl_support import Kubectl
from tests.scheduler_live.support import SchedulerProcess

# Settings that make agents quick to report (as the agent_cluster tests use them).
AGENT_SETTINGS: dict[str, Any] = {}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


class Cluster:
    def __init__(self, api: ApiServerProcess, *, scheduler: bool = True) -> None:
        self.api = api
        self.dir = Path(tempfile.mkdtemp(prefix="kn-workloads-"))
        self.client = KubeClient(load_kubeconfig(api.kubeconfig))
        self.kubectl = Kubectl(api.kubeconfig, self.dir / "kubectl-cache")
        self.agents: list[AgentProcess] = []
        self.scheduler = (
            SchedulerProcess(api.data_dir / "scheduler.kubeconfig", log_path=self.dir / "scheduler.log")
            if scheduler
            else None
        )
        self.manager: ControllerManagerProcess | None = None
        self.start_manager()

    def start_manager(self) -> ControllerManagerProcess:
        # A short lease, so a manager that replaces a killed one takes over within seconds.
        self.manager = ControllerManagerProcess(
            self.api.data_dir / "controller-manager.kubeconfig",
            "--leader-elect-lease-duration=4", "--leader-elect-renew-deadline=3",
            "--leader-elect-retry-period=1",
        )  # fmt: skip
        return self.manager

    def add_agent(self) -> AgentProcess:
        agent = AgentProcess(self.api.kubeconfig, settings=AGENT_SETTINGS)
        agent.kubeconfig = self.api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
        self.agents.append(agent)
        agent.start()
        return agent

    def pods(self, selector: str, namespace: str = "default") -> list[dict[str, Any]]:
        return list(self.client.list(PODS, namespace, label_selector=selector).get("items") or [])

    def out(self, *args: str, stdin: str | None = None, timeout: float = 60.0) -> str:
        result: subprocess.CompletedProcess[str] = self.kubectl.run(*args, stdin=stdin, timeout=timeout)
        return result.stdout

    def close(self) -> list[str]:
        leftovers: list[str] = []
        if self.manager is not None:
            self.manager.close()
        if self.scheduler is not None:
            self.scheduler.stop()
        for agent in self.agents:
            leftovers += agent.close()
        self.client.close()
        return leftovers


class Sampler:
    """Samples a value on a thread until stopped (e.g. a Deployment's Ready pods during a rollout)."""

    def __init__(self, sample: Callable[[], int], interval: float = 0.05) -> None:
        self.values: list[int] = []
        self._sample = sample
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.values.append(self._sample())
            self._stop.wait(self._interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
