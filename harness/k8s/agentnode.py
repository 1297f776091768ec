"""`AgentNode`: kubenode's agent joined to a real `ControlPlane` as node `kn-<random>`, with the node's own
`system:node:<name>` client certificate, its Node's InternalIP 127.0.0.1 (kube-apiserver reaches its
authenticated endpoint there) and its own CDI directory (where a DRA driver started for it writes), plus the
helpers the interop scenarios share: pods pinned to the node by a nodeSelector (the real scheduler still binds
them) in one namespace, waits, and teardown of every process started for the node.

    with AgentNode(cp, namespace="agent-interop") as node:
        node.create_pod("p", [{"name": "main", "image": "busybox", "command": [...]}])   # seconds to Running
        node.kubectl("logs", "p"); node.extra.append(ManagedProcess(...))               # stopped on exit
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import yaml

from harness.agent import AgentProcess
from harness.k8s.controlplane import ControlPlane
from harness.k8s.process import ManagedProcess

REPO = Path(__file__).resolve().parents[2]

T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None], timeout: float, what: str | Callable[[], str], interval: float = 0.1
) -> T:
    """check()'s first truthy value; an AssertionError naming `what` (a callable: evaluated then, e.g. a
    log's tail) and the last exception check raised when none came within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # not yet; shown if it never holds
            last = exc
        time.sleep(interval)
    text = what() if callable(what) else what
    raise AssertionError(f"{text}: not within {timeout:.0f} s (last error: {last})")


class AgentNode:
    def __init__(
        self, cp: ControlPlane, namespace: str, *, plugin_config: Path | None = None,
        settings: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self.cp = cp
        self.namespace = namespace
        self.agent = AgentProcess(
            cp.admin_kubeconfig,  # replaced below by the node's own identity
            settings={"nodeIp": "127.0.0.1", **(settings or {})},
            plugin_config=plugin_config or REPO / "tests/configs/static.yaml",
        )
        config = yaml.safe_load(self.agent.config_path.read_text())
        config["cdiSpecDirs"] = [str(self.agent.dir / "cdi")]  # where its DRA drivers write claims' specs
        self.agent.config_path.write_text(yaml.safe_dump(config))
        (self.agent.dir / "cdi").mkdir()
        self.name = self.agent.node
        self.kubeconfig = cp.node_kubeconfig(self.name)
        self.agent.kubeconfig = self.kubeconfig
        self.started = 0.0
        self.extra: list[ManagedProcess] = []

    def __enter__(self) -> AgentNode:
        self.cp.create_namespace(self.namespace)
        self.started = time.monotonic()
        try:
            self.agent.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        leftovers = self.close()
        if exc_type is None:
            assert not leftovers, f"cgroups left behind: {leftovers}"

    def close(self) -> list[str]:
        """Stop what was started for the node, then the agent (its pods, cgroups and directories go); delete
        the Node. The cgroups that had to be swept."""
        for proc in self.extra:
            proc.stop()
        leftovers = self.agent.close()
        self.cp.api("DELETE", f"/api/v1/nodes/{self.name}")
        return leftovers

    def get(self, path: str) -> dict[str, Any]:
        status, body = self.cp.api("GET", path)
        assert status == 200, (path, status, body)
        return dict(body)

    def pod(self, name: str) -> dict[str, Any]:
        return self.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def create_pod(self, name: str, containers: list[dict[str, Any]], **spec: Any) -> float:
        """Create a pod the scheduler binds (to this node, by nodeSelector); seconds until it is Running."""
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": self.name},
                "terminationGracePeriodSeconds": 5,
                "containers": containers,
                **spec,
            },
        }
        created = time.monotonic()
        status, answer = self.cp.api("POST", f"/api/v1/namespaces/{self.namespace}/pods", body)
        assert status == 201, answer
        self.wait_running(name)
        return time.monotonic() - created

    def wait_running(self, name: str, timeout: float = 60) -> dict[str, Any]:
        def running() -> dict[str, Any] | None:
            pod = self.pod(name)
            phase = pod.get("status", {}).get("phase")
            assert phase not in ("Failed", "Succeeded"), pod.get("status")
            return pod if phase == "Running" else None

        try:
            return wait_for(running, timeout, f"pod {name} Running")
        except AssertionError:
            raise AssertionError(
                f"{self.describe(name)}\n--- agent ---\n{self.agent.log()[-4000:]}"
            ) from None

    def describe(self, name: str) -> str:
        return self.cp.kubectl("describe", "pod", "-n", self.namespace, name, check=False).stdout

    def delete_pod(self, name: str, timeout: float = 60) -> None:
        self.cp.api("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        wait_for(
            lambda: self.cp.api("GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")[0] == 404,
            timeout, f"pod {name} gone",
        )  # fmt: skip

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl("-n", self.namespace, *args, check=check, input=input)
