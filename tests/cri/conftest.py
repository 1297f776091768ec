"""The real processes the CRI tests share: a containerd with a private config (harness/containerd.py) and an
API server, one each for the package; an agent on that containerd joined as its node, one per module; kubectl.
Each module's agent is a node of its own, and what it runs is found by its node's labels, so the modules share
the runtime and the server as nodes of one cluster do (a module that restarts containerd starts it again).

The agent's runtime endpoint names the containerd, and it listens at the host's IP because the API server
reaches the agent for logs, exec and /metrics/resource at the Node's InternalIP, as `kubenode up` listens.
A module that needs other agent settings overrides `agent` with `joined_agent(...)`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from harness.containerd import ContainerdProcess
from kubenode.hostnet import host_ip
from kubenode.kubeclient import KubeClient, load_kubeconfig
from tests.agent.support import require_cgroup_v1
from tests.apiserver.kubectl_support import Kubectl


@pytest.fixture(scope="package")
def containerd() -> Iterator[ContainerdProcess]:
    process = ContainerdProcess()
    try:
        yield process.start()
    finally:
        process.close()


@pytest.fixture(scope="package")
def api() -> Iterator[ApiServerProcess]:
    require_cgroup_v1()
    with ApiServerProcess() as server:
        yield server


@pytest.fixture(scope="package")
def admin(api: ApiServerProcess) -> Iterator[KubeClient]:
    client = KubeClient(load_kubeconfig(api.kubeconfig))
    yield client
    client.close()


@pytest.fixture(scope="module")
def logs_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kn-podlogs-") as path:
        yield Path(path)


def joined_agent(
    api: ApiServerProcess,
    containerd: ContainerdProcess,
    logs_dir: Path,
    *,
    plugin: bool = False,
    plugin_config: Path | None = None,
    **settings: Any,
) -> Iterator[AgentProcess]:
    """An agent on `containerd`, joined to `api` as its node, for a module fixture to yield; closed after,
    and a cgroup it leaves behind fails the module."""
    settings = {
        "containerRuntimeEndpoint": containerd.endpoint,
        "podLogsDir": str(logs_dir),
        "listen": f"{host_ip()}:0",
        **settings,
    }
    process = AgentProcess(api.kubeconfig, settings=settings, plugin=plugin)
    if plugin_config is not None:
        process.plugin_config = plugin_config
    process.kubeconfig = api.kubeconfig_for(f"system:node:{process.node}", ["system:nodes"])
    try:
        yield process.start()
    finally:
        leaks = process.close()
        assert not leaks, f"cgroups left behind: {leaks}"


@pytest.fixture(scope="module")
def agent(api: ApiServerProcess, containerd: ContainerdProcess, logs_dir: Path) -> Iterator[AgentProcess]:
    yield from joined_agent(api, containerd, logs_dir, plugin=True)  # with the static device plugin


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "cache")
