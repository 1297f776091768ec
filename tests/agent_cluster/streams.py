"""Helpers for the stream tests (exec, attach, port-forward): the real kubectl, a running pod, a forward."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.agent import AgentProcess
from kubenode.kubeclient import PODS, KubeClient
from tests.agent_cluster.support import pod_body, wait_until
from tests.apiserver.kubectl_support import kubectl_path

NODE_IP = {"nodeIp": "127.0.0.1"}  # the agent's endpoints listen on loopback; the Node must say so


def kubectl(
    kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> tuple[int, str, str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run(
        [str(kubectl_path()), *args], input=stdin, capture_output=True, text=True, env=env, timeout=timeout
    )
    return done.returncode, done.stdout, done.stderr


def start_pod(
    admin: KubeClient,
    agent: AgentProcess,
    script: str,
    prefix: str = "exec",
    *,
    argv: list[str] | None = None,
    **container: Any,
) -> str:
    """A pod on `agent`'s node running the shell `script` (or `argv`) with `container`'s fields, waited for
    until its container runs; returns its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    policy = container.pop("restart_policy", "Always")
    volumes = container.pop("pod_volumes", None)
    body = pod_body(name, agent.node, script, grace=1, restart_policy=policy)
    if volumes:
        body["spec"]["volumes"] = volumes
    body["spec"]["containers"][0].update(container, **({"command": argv} if argv else {}))
    admin.create(PODS, body, "default")
    wait_until(lambda: container_running(admin, name), 60, f"{name} running")
    return name


def container_running(admin: KubeClient, name: str) -> bool:
    statuses = admin.get(PODS, name, "default").get("status", {}).get("containerStatuses") or []
    return bool(statuses and "running" in statuses[0].get("state", {}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PortForward:
    """`kubectl port-forward` in the background; `local` is the port it listens on."""

    def __init__(self, kubeconfig: Path, pod: str, remote: int) -> None:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.process = subprocess.Popen(
            [str(kubectl_path()), "port-forward", f"pod/{pod}", f":{remote}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert self.process.stdout is not None
        first = self.process.stdout.readline()  # "Forwarding from 127.0.0.1:NNNN -> remote"
        match = re.search(r"127\.0\.0\.1:(\d+) ->", first)
        assert match, (first, self.stop())
        self.local = int(match.group(1))

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
        _, err = self.process.communicate(timeout=30)
        return str(err)


Kubectl = Callable[..., tuple[int, str, str]]
