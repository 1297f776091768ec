"""Fixtures: one real `kubenode apiserver` for the package, an admin client, agents always cleaned up."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import KubeClient, load_kubeconfig
from tests.agent.support import require_cgroup_v1


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


@pytest.fixture
def make_agent(api: ApiServerProcess) -> Iterator[Callable[..., AgentProcess]]:
    made: list[AgentProcess] = []

    def make(**options: Any) -> AgentProcess:
        agent = AgentProcess(api.kubeconfig, **options)
        # The agent authenticates as its node (system:node:<name>, group system:nodes), as a kubelet does.
        agent.kubeconfig = api.kubeconfig_for(f"system:node:{agent.node}", ["system:nodes"])
        made.append(agent)
        return agent

    yield make
    leaks = []
    for agent in made:
        leaks.extend(agent.close())
    assert not leaks, f"cgroups left behind: {leaks}"
